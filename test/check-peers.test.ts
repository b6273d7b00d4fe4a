import { describe, expect, it } from "vitest";
import { judge, lineOf, versionsTested } from "../scripts/check-peers.js";

const devDependencies = { ai: "7.0.185", ai6: "npm:ai@6.0.326", "@openai/agents": "0.20.0", zod: "4.6.7" };

describe("npm run check:peers", () => {
  it("passes a peer whose latest release is in range and whose current major is tested", () => {
    expect(judge("ai", ">=6 <8", "7.1.0", devDependencies).problems).toEqual([]);
  });

  it("fails a peer whose latest major is outside the range, saying what to do", () => {
    const [outside, untested] = judge("ai", ">=6 <8", "8.0.0", devDependencies).problems;
    expect(outside).toMatch(/latest release 8\.0\.0 is outside our range ">=6 <8".*widen the range/);
    expect(untested).toMatch(
      /no devDependency tests its current major \(8\.x\); tested: 7\.0\.185, 6\.0\.326/,
    );
  });

  it("fails a peer whose latest major is in range but tested by no devDependency", () => {
    expect(judge("zod", "^3.25.0 || ^4.0.0 || ^5.0.0", "5.0.1", devDependencies).problems).toEqual([
      expect.stringContaining("no devDependency tests its current major (5.x)"),
    ]);
  });

  it("reads a 0.x minor as a major, as npm's caret does", () => {
    expect(lineOf("0.21.3")).toBe("0.21");
    expect(lineOf("7.0.185")).toBe("7");
    expect(judge("@openai/agents", ">=0.20.0 <0.22", "0.21.0", devDependencies).problems).toEqual([
      expect.stringContaining("(0.21.x)"),
    ]);
  });

  it("counts a version tested under an npm alias", () => {
    expect(versionsTested("ai", devDependencies)).toEqual(["7.0.185", "6.0.326"]);
    expect(versionsTested("redis", devDependencies)).toEqual([]);
    // A spec that names no release (a tag, a git URL) is skipped, not a crash.
    expect(
      versionsTested("ai", { ai: "latest", ai6: "npm:ai@github:vercel/ai", ai5: "npm:ai@5.0.1" }),
    ).toEqual(["5.0.1"]);
  });
});
