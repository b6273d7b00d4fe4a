/**
 * The Lua scripts behind the Redis store: one per atomic operation, each touching exactly one key
 * (KEYS[1], the record's string value), so every operation is one round trip and runs on Redis Cluster.
 *
 * A record is one string (see record-value.ts): a one-line header of decimal fields, then its strings
 * back to back, each exactly as many bytes long as the header says, so a script reads it with one GET,
 * writes it with one SET and hands it back as one bulk string. A claim made by a plain command instead
 * writes a stub (see `claimStub`), whose times are the key's expiry: every script that reads a record
 * reads a stub as the record it stands for.
 *
 * Liveness is the record's own `expiresAt`, which every script judges. The key of a completed or failed
 * record goes when its window ends; the key of one in progress or unknown a day later (`openRecordKeptMs`),
 * so that its owner can still settle it: claim, get and takeover treat it as absent meanwhile, and a claim
 * replaces it.
 *
 * Every script but release, peek and delete starts with the same two arguments, the clock it judges by:
 * ARGV[1] is the caller's time in epoch ms, or "" for the server's `TIME`; ARGV[2] is an offset in ms
 * added to the server's time (0 outside tests). The rest have names: each script lists them once, with
 * how each is made from the request, and that list both reads them into Lua locals of the same names
 * and lays them out in ARGV in the same order (see `script`).
 */
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import type { ClaimRequest, RenewRequest, SettleRequest, TakeoverRequest } from "../core/store.js";
import { claimTail, openRecordKeptMs } from "./record-value.js";

export interface RedisScript {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
}

/** A script and the one list of its named arguments, for requests of type R. */
export interface ScriptOf<R> extends RedisScript {
  /**
   * The script's ARGV for `request`: the clock's two if it judges time (`now`, "" for the server's clock,
   * and `offset`, as above; without them, the server's clock and no offset), then its named arguments.
   */
  argv(request: R, now?: string, offset?: string): string[];
}

/** How a script's named arguments are made from its request, in ARGV order; each name is a Lua local. */
type Arguments<R> = { readonly [name: string]: (request: R) => string };

// Scripts start with the clock and the path most calls take (a replay reads the expiry and returns),
// and define what a write needs after it: Lua creates a script's local functions on every call.
const clock = `
-- Redis 5 and 6 replicate scripts verbatim unless told otherwise, and refuse writes after TIME;
-- from Redis 7 effects replication is the only mode and replicate_commands() does nothing.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local server_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now
if ARGV[1] == '' then now = server_now + tonumber(ARGV[2]) else now = tonumber(ARGV[1]) end
`;

// A record's value (record-value.ts):
//   expiresAt status leaseExpiresAt createdAt updatedAt attempts #token #tool #fingerprint #result #error\n
//   token tool fingerprint result error
// with #x the byte length of x and "-" for a null result or error. `layout` captures every header field
// but updatedAt, then the position of the token.
const layout = `
local layout = '^(%-?%d+) (%l[%l_]*) (%-?%d+) (%-?%d+) %-?%d+ (%d+) (%d+) (%d+) (%d+) ([%d-]+) ([%d-]+)\\n()'
`;

/**
 * How long a store that remembers released tokens (KEYS[2], see `releasedName`) keeps one: a day after its
 * release, by the server's clock. Every token released on the key within that day is kept, however many:
 * a late claim can come from any of them (see `releaseScript`), so none is forgotten early to make room.
 */
const releasedTokenMemoryMs = 24 * 60 * 60 * 1000;

// A claim or takeover by a token released on the key (KEYS[2], where the store remembers them) is late:
// its caller gave up on it and released it. It never lands, whatever the record's key holds.
const releasedCheck = `
if KEYS[2] and redis.call('ZSCORE', KEYS[2], token) then
  return redis.error_reply('RELEASED redisStore: this claim was released before it arrived, and is not applied; call again with a new token.')
end
`;

/** The largest lease or TTL a stub may carry: what `stubFits` lets a claim write (a safe integer). */
const maxSafe = String(Number.MAX_SAFE_INTEGER);

// A stub (\`claimStub\`) read as the record it stands for, in \`v\`: the claim's times come from the key's
// expiry, which the server set by its own clock when the claim landed (PEXPIRETIME + 1 is keptMs after
// the record expires; ttlMs before that its lease passes; leaseMs before that it was claimed). A stub whose
// key lost its expiry (another program's PERSIST, a copy that dropped TTLs) has lost its times: it gets a
// claim's life again from now, as if it landed now, rather than stay no record for good (its lease
// restarts, so nobody takes over an owner that may still run). Stubs exist only on Redis 7 and later, as
// PEXPIRETIME.
const fromStub = `
if string.byte(v, 1) == 126 then
  local stubLease, stubTtl, stubKept, stubTail = string.match(v, '^~ (%d+) (%d+) (%d+)()')
  -- Times no store writes (past 2^53 - 1, where Lua's numbers and %d stop being exact) are no stub's:
  -- left as they are, the value is refused, never turned into an expiry that deletes the key.
  if stubLease and (tonumber(stubLease) > ${maxSafe} or tonumber(stubTtl) > ${maxSafe} or tonumber(stubKept) > ${maxSafe}) then stubLease = nil end
  local pe = stubLease and redis.call('PEXPIRETIME', KEYS[1]) or -1
  if pe == -1 and stubLease then
    local life = tonumber(stubLease) + tonumber(stubTtl) + tonumber(stubKept) - 1
    if life >= 1 then
      redis.call('PEXPIRE', KEYS[1], string.format('%d', life))
      pe = redis.call('PEXPIRETIME', KEYS[1])
    end
  end
  if pe >= 0 then
    local stubLeaseEnd = pe + 1 - tonumber(stubKept) - tonumber(stubTtl)
    local claimedAt = string.format('%d', stubLeaseEnd - tonumber(stubLease))
    v = string.format('%d', pe + 1 - tonumber(stubKept)) .. ' in_progress ' .. string.format('%d', stubLeaseEnd) .. ' ' ..
      claimedAt .. ' ' .. claimedAt .. string.sub(v, stubTail)
  end
end
`;

// Whether a value is a whole record, its sizes adding up (needs `layout`): checked before an expired
// record is replaced or deleted, so nothing else at a record's key is ever taken for one.
const recordCheck = `
local function is_record(v)
  local e, _, _, _, _, nt, ntool, nf, nr, ne, at = string.match(v, layout)
  if not e then return false end
  local size = at - 1 + nt + ntool + nf
  for _, n in ipairs({nr, ne}) do
    if n ~= '-' then
      if not string.match(n, '^%d+$') then return false end
      size = size + tonumber(n)
    end
  end
  return size == #v
end
`;

const codec = `${layout}
local function ms(n) return string.format('%d', n) end
local function head(expires, status, lease, created, updated, attempts, nt, ntool, nf, nr, ne)
  return ms(expires) .. ' ' .. status .. ' ' .. ms(lease) .. ' ' .. ms(created) .. ' ' .. ms(updated) .. ' ' ..
    attempts .. ' ' .. nt .. ' ' .. ntool .. ' ' .. nf .. ' ' .. nr .. ' ' .. ne .. '\\n'
end
`;

// Redis deletes the key by its own clock: never before the record's expiresAt, nor before the same
// remaining life has passed on the server's clock (a caller whose clock runs behind never has its
// records vanish early). With the server clock and no offset the two are the same instant. Redis keeps
// a key through the millisecond of its expiry and a record is live only before its expiresAt, so the
// key of a completed or failed record expires the millisecond before: on the server's clock a key that
// is there holds a live settled record, and a plain command may take its presence for liveness. The key
// of a record in progress or unknown stays openRecordKeptMs longer, for its owner's late settle (top).
const write = `
local function store(v, at)
  redis.call('SET', KEYS[1], v)
  redis.call('PEXPIREAT', KEYS[1], ms(math.max(at, server_now + (at - now)) - 1 + ${openRecordKeptMs}))
end
`;

/**
 * The same expiry as store's, for a script that wrote KEYS[1] itself, with `expires` (a number) in
 * scope: `kept` is a Lua expression for how long the key outlives the record (0 once settled for good).
 */
const expireAt = (kept: string) => `
redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.max(expires, server_now + (expires - now)) - 1 + ${kept}))`;

/** A string's size in UTF-8 bytes, as Lua's # counts it. */
function byteLength(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/** A nullable string's size for a record's header: "-" for null. */
function sizeOf(text: string | null): string {
  return text === null ? "-" : String(byteLength(text));
}

/**
 * A script whose body reads its arguments by name: `args` numbers them (after the clock's two when
 * `clocked`) and the script opens by reading each into a local of that name, so the order the store
 * sends them in and the order the Lua reads them in are one list.
 */
function script<R = undefined>(
  name: string,
  clocked: boolean,
  args: Arguments<R>,
  body: string,
): ScriptOf<R> {
  const names = Object.keys(args);
  const encoders = Object.values(args);
  const first = clocked ? 3 : 1;
  const locals =
    names.length === 0
      ? ""
      : `local ${names.join(", ")} = ${names.map((_, i) => `ARGV[${first + i}]`).join(", ")}\n`;
  const lua = `${clocked ? clock : ""}${locals}${body}`;
  const argv = clocked
    ? (request: R, now = "", offset = "0") => {
        const values = [now, offset];
        for (const encode of encoders) values.push(encode(request));
        return values;
      }
    : (request: R) => encoders.map((encode) => encode(request));
  return { name, lua, sha: createHash("sha1").update(lua).digest("hex"), argv };
}

/**
 * Returns now (an integer) when it claimed, or {now, value} with the live holder's value. A value that
 * is not a record is handed back too, so the caller refuses it rather than have it overwritten.
 *
 * The client sends the record's tail, everything after its times (see `claimTail`): the script formats
 * only the three times it judges by, since Lua turns each number into text through sprintf (a third of
 * what the script cost the server when it formatted every size itself).
 */
export const claimScript = script<ClaimRequest>(
  "claim",
  true,
  {
    leaseMs: (r) => String(r.leaseMs),
    ttlMs: (r) => String(r.ttlMs),
    tail: claimTail,
    token: (r) => r.token,
  },
  `${releasedCheck}
local v = redis.call('GET', KEYS[1])
if v then
  ${fromStub}
  local expires = tonumber(string.match(v, '^%-?%d+'))
  if not expires or expires > now then return {now, v} end
  ${layout}${recordCheck}
  -- An expired record is replaced whole (none of its strings may carry over); anything else is refused.
  if not is_record(v) then return {now, v} end
end
local lease = now + tonumber(leaseMs)
local expires = lease + tonumber(ttlMs)
local at = string.format('%d', now)
local e = string.format('%d', expires)
redis.call('SET', KEYS[1], e .. ' in_progress ' .. string.format('%d', lease) .. ' ' .. at .. ' ' .. at .. tail)
${expireAt(String(openRecordKeptMs))}
return now
`,
);

/** Returns the new record's value, or nil. */
export const takeoverScript = script<TakeoverRequest>(
  "takeover",
  true,
  {
    fromToken: (r) => r.fromToken,
    token: (r) => r.token,
    leaseMs: (r) => String(r.leaseMs),
    ttlMs: (r) => String(r.ttlMs),
  },
  `${codec}${write}
if KEYS[2] and redis.call('ZSCORE', KEYS[2], token) then return false end
local v = redis.call('GET', KEYS[1])
if not v then return false end
${fromStub}local e, s, l, c, a, nt, ntool, nf, _, ne, at = string.match(v, layout)
if not e or tonumber(e) <= now or string.sub(v, at, at + nt - 1) ~= fromToken then return false end
if not (s == 'unknown' or (s == 'in_progress' and tonumber(l) <= now)) then return false end
local lease = now + tonumber(leaseMs)
local expires = math.max(tonumber(e), lease + tonumber(ttlMs))
-- The new owner starts without a result; an error (why the record was unknown) stays. It comes last.
local err = ''
if ne ~= '-' and ne ~= '0' then err = string.sub(v, -tonumber(ne)) end
v = head(expires, 'in_progress', lease, c, now, a + 1, #token, ntool, nf, '-', ne) ..
  token .. string.sub(v, at + nt, at + nt + ntool + nf - 1) .. err
store(v, expires)
return v
`,
);

/**
 * Returns the settled record's value up to its fingerprint (the caller has the result and error it
 * sent, and they are not sent back), or nil. A null result or error is sent as "" with its flag "0".
 */
export const settleScript = script<SettleRequest>(
  "settle",
  true,
  {
    token: (r) => r.token,
    status: (r) => r.status,
    // The outcome's sizes in bytes, "-" for null (which is sent as ""): counted by the client, which
    // has them for the price of a scan, rather than formatted by the script.
    sizes: (r) => `${sizeOf(r.result)} ${sizeOf(r.error)}`,
    result: (r) => r.result ?? "",
    error: (r) => r.error ?? "",
    ttlMs: (r) => String(r.ttlMs),
  },
  `${layout}
local v = redis.call('GET', KEYS[1])
if not v then return false end
local c, a, nt, ntool, nf, at
if string.byte(v, 1) == 126 then
  -- A stub (a claim in progress) read in place, rather than made into its record and parsed again as
  -- fromStub does: only its claim time is wanted, from the key's expiry (now, if it lost it), and the
  -- record is written whole below.
  local stubLease, stubTtl, stubKept
  stubLease, stubTtl, stubKept, a, nt, ntool, nf, at = string.match(v, '^~ (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) [%d-]+ [%d-]+\\n()')
  if not stubLease or tonumber(stubLease) > ${maxSafe} or tonumber(stubTtl) > ${maxSafe} or tonumber(stubKept) > ${maxSafe} then return false end
  -- A stub holds its strings and nothing after them: a value whose sizes do not add up is no stub of ours.
  if #v ~= at - 1 + nt + ntool + nf then return false end
  if string.sub(v, at, at + nt - 1) ~= token then return false end
  local pe = redis.call('PEXPIRETIME', KEYS[1])
  if pe < 0 then
    -- As fromStub: a key life under 1 ms is no claim's (SET PX refuses it), so no times, no record.
    local life = tonumber(stubLease) + tonumber(stubTtl) + tonumber(stubKept) - 1
    if life < 1 then return false end
    pe = server_now + life
  end
  c = string.format('%d', pe + 1 - tonumber(stubKept) - tonumber(stubTtl) - tonumber(stubLease))
else
  local found, s, _
  found, s, _, c, a, nt, ntool, nf, _, _, at = string.match(v, layout)
  -- Past the window too, while the record is still here: nobody claimed the key since.
  if not found or not (s == 'in_progress' or s == 'unknown') then return false end
  if string.sub(v, at, at + nt - 1) ~= token then return false end
end
local expires = now + tonumber(ttlMs)
local e = string.format('%d', expires)
local updated = string.format('%d', now)
local settled = e .. ' ' .. status .. ' ' .. updated .. ' ' .. c .. ' ' .. updated .. ' ' .. a .. ' ' ..
  nt .. ' ' .. ntool .. ' ' .. nf .. ' ' .. sizes .. '\\n' .. string.sub(v, at, at + nt + ntool + nf - 1)
redis.call('SET', KEYS[1], settled .. result .. error)
-- An unknown outcome can still be settled by its owner: its key is kept as a claim's is.
${expireAt(`(status == 'unknown' and ${openRecordKeptMs} or 0)`)}
return settled
`,
);

/** Returns 1 when renewed, else 0. */
export const renewScript = script<RenewRequest>(
  "renew",
  true,
  { token: (r) => r.token, leaseMs: (r) => String(r.leaseMs), ttlMs: (r) => String(r.ttlMs) },
  `${codec}${write}
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
${fromStub}local e, s, _, c, a, nt, ntool, nf, nr, ne, at = string.match(v, layout)
if not e or s ~= 'in_progress' or string.sub(v, at, at + nt - 1) ~= token then return 0 end
local lease = now + tonumber(leaseMs)
local expires = math.max(tonumber(e), lease + tonumber(ttlMs))
-- Only the header changes: everything from the token on is kept as it is.
store(head(expires, s, lease, c, now, a, nt, ntool, nf, nr, ne) .. string.sub(v, at), expires)
return 1
`,
);

/**
 * Returns 1 when it deleted the record, else 0. Takes no clock: release judges no time. With KEYS[2], it
 * first remembers the token there for a day by the server's clock, whatever the record's key holds (a
 * claim or takeover by it that arrives later never lands), forgetting the tokens whose day has passed.
 *
 * Every released token is remembered, not only those whose claim went unanswered: the client resends a
 * request after a network error on its own, so a claim answered by a resent copy may have an earlier copy
 * still on its way, which the store never hears of. Nor is any token forgotten before its day to bound the
 * set: the one forgotten could be the one whose claim is late. The set holds the releases of the last day
 * on this key, each one a call's (the core releases a token it claimed with), so it grows with the calls
 * on the key as its records do, and a release never fails for want of room.
 */
export const releaseScript = script<{ readonly token: string }>(
  "release",
  false,
  { token: (r) => r.token },
  `${codec}
if KEYS[2] then
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  local released_at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ms(released_at - ${releasedTokenMemoryMs}))
  redis.call('ZADD', KEYS[2], ms(released_at), token)
  redis.call('PEXPIRE', KEYS[2], ${releasedTokenMemoryMs})
end
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
${fromStub}local e, s, _, _, _, nt, _, _, _, _, at = string.match(v, layout)
if not e or not (s == 'in_progress' or s == 'unknown') or string.sub(v, at, at + nt - 1) ~= token then return 0 end
return redis.call('DEL', KEYS[1])
`,
);

/** Returns the live record's value, or nil (a value that is not a record is handed back: the caller refuses it). */
export const getScript = script(
  "get",
  true,
  {},
  `
local v = redis.call('GET', KEYS[1])
if not v then return false end
${fromStub}
local expires = tonumber(string.match(v, '^%-?%d+'))
if not expires or expires > now then return v end
${layout}${recordCheck}
if is_record(v) then return false end
return v
`,
);

/** For list: the record's value whatever its expiry, a stub read as its record (nil when absent). Takes no clock. */
export const peekScript = script(
  "peek",
  false,
  {},
  `
local v = redis.call('GET', KEYS[1])
if not v then return false end
${fromStub}
return v
`,
);

/** Returns 1 when it deleted the record, else 0. Takes no clock. */
export const deleteScript = script("delete", false, {}, "return redis.call('DEL', KEYS[1])");

/** Returns 1 when the record had expired and was deleted, else 0. */
export const purgeScript = script(
  "purge",
  true,
  {},
  `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
${fromStub}
local expires = tonumber(string.match(v, '^%-?%d+'))
if not expires or expires > now then return 0 end
${layout}${recordCheck}
if is_record(v) then return redis.call('DEL', KEYS[1]) end
return 0
`,
);
