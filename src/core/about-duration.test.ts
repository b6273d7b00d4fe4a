import { describe, expect, it } from "vitest";
import { aboutDuration } from "./about-duration.js";

describe("aboutDuration", () => {
  it("keeps each figure in the unit that tells the truth about it", () => {
    expect(aboutDuration(0.4)).toBe("about 1 ms");
    expect(aboutDuration(134)).toBe("about 134 ms");
    expect(aboutDuration(999)).toBe("about 999 ms");
    expect(aboutDuration(999.6)).toBe("about 1 second");
    expect(aboutDuration(1_499)).toBe("about 1 second");
    expect(aboutDuration(2_600)).toBe("about 3 seconds");
    expect(aboutDuration(42_000)).toBe("about 42 seconds");
    expect(aboutDuration(119_000)).toBe("about 119 seconds");
    expect(aboutDuration(150_000)).toBe("about 3 minutes");
    expect(aboutDuration(60 * 60_000)).toBe("about 60 minutes");
    expect(aboutDuration(3 * 3_600_000)).toBe("about 3 hours");
  });
});
