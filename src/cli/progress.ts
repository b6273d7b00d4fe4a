/**
 * Progress for long work: a bar on a TTY (cli-progress), one line per step otherwise, so CI logs show
 * what is running without a wall of redraws.
 */
import cliProgress from "cli-progress";
import type { OutputStream } from "./output.js";

export interface Progress {
  /** A step begins. */
  step(label: string): void;
  /** Every step is done; clears the bar. */
  stop(): void;
}

/** Report `total` steps on `stream` (stderr, so stdout stays clean for `--json`). */
export function progress(total: number, stream: NodeJS.WritableStream & OutputStream): Progress {
  let done = 0;
  if (stream.isTTY !== true) {
    return {
      step(label) {
        done += 1;
        stream.write(`[${done}/${total}] ${label} …\n`);
      },
      stop() {},
    };
  }
  const bar = new cliProgress.SingleBar(
    { format: "{bar} {value}/{total} {step}", stream, hideCursor: true, clearOnComplete: true },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { step: "" });
  return {
    step(label) {
      bar.update(done, { step: label });
      done += 1;
    },
    stop() {
      bar.update(total, { step: "" });
      bar.stop();
    },
  };
}
