import { describe, expect, it } from "vitest";
import { loneSurrogateIndex } from "./unicode.js";

describe("loneSurrogateIndex", () => {
  it("finds the first lone surrogate, high or low, and passes pairs", () => {
    expect(loneSurrogateIndex("")).toBe(-1);
    expect(loneSurrogateIndex("plain ascii")).toBe(-1);
    expect(loneSurrogateIndex("é 漢字 \ud83d\ude00")).toBe(-1);
    expect(loneSurrogateIndex("\ud83d")).toBe(0);
    expect(loneSurrogateIndex("ab\ude00")).toBe(2);
    expect(loneSurrogateIndex("\ud83d\ude00x\ud83d")).toBe(3);
    expect(loneSurrogateIndex("\ude00\ud83d")).toBe(0);
    expect(loneSurrogateIndex("\ud83d\ud83d\ude00")).toBe(0);
  });
});
