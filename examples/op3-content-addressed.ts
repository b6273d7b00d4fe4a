/**
 * OP-3: content-addressed writes on the file system.
 *
 * An agent's `save_report` tool writes a report it generated. The key is the SHA-256 of the report's
 * canonical JSON, so the same report saved twice (a retry, a resumed run, a duplicate tool call) is one
 * file, even when its fields arrive in another order. Twenty concurrent saves create it once, and no
 * partial file is ever visible.
 *
 * Run: node --import tsx examples/op3-content-addressed.ts (exits non-zero if any check fails)
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileSystemTarget, writeContentOnce } from "idempotool/ops";

const dir = mkdtempSync(join(tmpdir(), "idempotool-op3-example-"));
let failures = 0;
function check(ok: boolean, what: string): void {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

try {
  const target = fileSystemTarget({ directory: dir });
  const saveReport = (report: unknown) => writeContentOnce(target, report);

  const first = await saveReport({ quarter: "Q3", revenue: 1200, regions: ["eu", "us"] });
  check(first.created, "the first save creates the file");

  const again = await saveReport({ regions: ["eu", "us"], revenue: 1200, quarter: "Q3" });
  check(
    !again.created && again.key === first.key,
    "the same report, fields reordered, is the same write: a no-op",
  );

  const racing = await Promise.all(
    Array.from({ length: 20 }, () => saveReport({ quarter: "Q4", revenue: 900 })),
  );
  check(
    racing.filter((r) => r.created).length === 1,
    "twenty concurrent saves of a new report create it once",
  );

  const files = readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
  check(
    files.length === 2 && files.every((f) => !f.name.startsWith(".tmp-")),
    "two files, no temp files left",
  );
  const stored = JSON.parse(readFileSync(target.pathOf(first.key), "utf8")) as { revenue: number };
  check(stored.revenue === 1200, "the stored file holds the whole report");
} finally {
  rmSync(dir, { recursive: true, force: true });
}

if (failures > 0) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
