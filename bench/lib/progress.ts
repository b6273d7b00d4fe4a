/** Progress on stderr, so stdout carries only the table: one rewritten line on a TTY, a line per step otherwise. */
export interface Progress {
  plan(steps: number): void;
  note(text: string): void;
  step(label: string, rep: number | undefined, opsPerSec: number): void;
  fail(label: string, error: string): void;
  done(): void;
}

export function progress(stream: NodeJS.WriteStream = process.stderr): Progress {
  let total = 0;
  let done = 0;
  const started = Date.now();
  const tty = stream.isTTY === true;
  let open = false;
  const line = (text: string, keep: boolean) => {
    if (tty) {
      stream.write(`\r\x1b[2K${text}${keep ? "\n" : ""}`);
      open = !keep;
    } else {
      stream.write(`${text}\n`);
    }
  };
  return {
    plan(steps) {
      total += steps;
    },
    note(text) {
      line(text, true);
    },
    step(label, rep, opsPerSec) {
      done++;
      const elapsed = Math.round((Date.now() - started) / 1000);
      const phase = rep === undefined ? "warm-up" : `rep ${rep + 1}`;
      line(
        `[${String(done).padStart(String(total).length)}/${total} ${elapsed}s] ${label} ${phase}: ${formatRate(opsPerSec)} ops/s`,
        false,
      );
    },
    fail(label, error) {
      line(`FAILED ${label}: ${error}`, true);
    },
    done() {
      if (tty && open) stream.write("\n");
    },
  };
}

export function formatRate(opsPerSec: number): string {
  if (!Number.isFinite(opsPerSec)) return "—";
  if (opsPerSec >= 100_000) return `${Math.round(opsPerSec / 1000)}k`;
  if (opsPerSec >= 10_000) return `${(opsPerSec / 1000).toFixed(1)}k`;
  if (opsPerSec >= 1000) return `${(opsPerSec / 1000).toFixed(2)}k`;
  return opsPerSec.toFixed(0);
}
