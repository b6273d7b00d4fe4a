/** The shell-words splitter behind `audit --mcp "<command>"`: POSIX quoting, no expansion. */
import { describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/errors.js";
import { parseShellCommand, splitShellWords } from "../src/cli/shell-words.js";

describe("splitShellWords", () => {
  it.each([
    ["npx -y @modelcontextprotocol/server-memory", ["npx", "-y", "@modelcontextprotocol/server-memory"]],
    ["  node   server.js  ", ["node", "server.js"]],
    [`node "my server.js" --root '/tmp/a b'`, ["node", "my server.js", "--root", "/tmp/a b"]],
    [`echo "say \\"hi\\" \\$HOME \\n"`, ["echo", 'say "hi" $HOME \\n']],
    [`echo 'no \\escapes "here"'`, ["echo", 'no \\escapes "here"']],
    ["a\\ b c", ["a b", "c"]],
    [`pre"fix"'suffix'`, ["prefixsuffix"]],
    [`x "" ''`, ["x", "", ""]],
    ["$HOME *.js", ["$HOME", "*.js"]],
  ])("%s", (line, words) => {
    expect(splitShellWords(line)).toEqual(words);
  });

  it("refuses an unterminated quote or a trailing backslash", () => {
    expect(() => splitShellWords(`node "server.js`)).toThrow(/unterminated double quote/);
    expect(() => splitShellWords("node 'server.js")).toThrow(/unterminated single quote/);
    expect(() => splitShellWords("node \\")).toThrow(UsageError);
  });
});

describe("parseShellCommand", () => {
  it("takes leading NAME=value words as the command's environment", () => {
    expect(parseShellCommand("MEMORY_FILE_PATH=/tmp/m.jsonl DEBUG= node server.js --stdio")).toEqual({
      command: "node",
      args: ["server.js", "--stdio"],
      env: { MEMORY_FILE_PATH: "/tmp/m.jsonl", DEBUG: "" },
    });
  });

  it("keeps a later NAME=value as an argument", () => {
    expect(parseShellCommand("node server.js MODE=fast").args).toEqual(["server.js", "MODE=fast"]);
  });

  it("refuses an empty command", () => {
    expect(() => parseShellCommand("   ")).toThrow(/empty/);
    expect(() => parseShellCommand("A=1")).toThrow(/empty/);
  });
});
