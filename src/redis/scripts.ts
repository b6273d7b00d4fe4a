/**
 * The Lua scripts behind the Redis store: one per atomic operation, each touching exactly one key
 * (KEYS[1], the record's hash), so every operation is one round trip and runs on Redis Cluster.
 *
 * Every script but release, peek and delete starts with the same two arguments, the clock it judges by:
 * ARGV[1] is the caller's time in epoch ms, or "" for the server's `TIME`; ARGV[2] is an offset in ms
 * added to the server's time (0 outside tests).
 */
import { createHash } from "node:crypto";

export interface RedisScript {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
}

// Redis 5 and 6 replicate scripts verbatim unless told otherwise, and refuse writes after TIME;
// from Redis 7 effects replication is the only mode and replicate_commands() does nothing.
const prelude = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local server_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now
if ARGV[1] == '' then now = server_now + tonumber(ARGV[2]) else now = tonumber(ARGV[1]) end
local function ms(n) return string.format('%d', n) end
-- Redis deletes the key by its own clock: never before the record's expiresAt, nor before the same
-- remaining life has passed on the server's clock (a caller whose clock runs behind never has its
-- records vanish early). With the server clock and no offset the two are the same instant.
local function expire_at(at)
  redis.call('PEXPIREAT', KEYS[1], ms(math.max(at, server_now + (at - now))))
end
local function live_expires_at()
  local expires_at = redis.call('HGET', KEYS[1], 'expiresAt')
  if expires_at and tonumber(expires_at) > now then return tonumber(expires_at) end
  return nil
end
-- The whole record if it is live, else nil (and whether an expired one is still there): one read
-- where the caller wants every field anyway.
local function live_record()
  local fields = redis.call('HGETALL', KEYS[1])
  for i = 1, #fields, 2 do
    if fields[i] == 'expiresAt' then
      if tonumber(fields[i + 1]) > now then return fields, true end
      break
    end
  end
  return nil, #fields > 0
end
`;

function script(name: string, body: string, clocked = true): RedisScript {
  const lua = clocked ? `${prelude}${body}` : body;
  return { name, lua, sha: createHash("sha1").update(lua).digest("hex") };
}

/**
 * ARGV[3..7]: tool, fingerprint, token, leaseMs, ttlMs.
 * Returns {1, now} when it claimed, or {0, now, field, value, …} with the live holder.
 */
export const claimScript = script(
  "claim",
  `
local holder, present = live_record()
if holder then
  table.insert(holder, 1, now)
  table.insert(holder, 1, 0)
  return holder
end
local lease = now + tonumber(ARGV[6])
local expires = math.max(now + tonumber(ARGV[7]), lease)
-- An expired record is replaced whole: none of its fields (a result, an error) may carry over.
if present then redis.call('DEL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'tool', ARGV[3], 'fingerprint', ARGV[4], 'status', 'in_progress',
  'token', ARGV[5], 'createdAt', ms(now), 'updatedAt', ms(now), 'leaseExpiresAt', ms(lease),
  'expiresAt', ms(expires), 'attempts', '1')
expire_at(expires)
return {1, now}
`,
);

/** ARGV[3..5]: fromToken, token, leaseMs. Returns the new record's fields, or nil. */
export const takeoverScript = script(
  "takeover",
  `
local expires = live_expires_at()
if not expires then return false end
local r = redis.call('HMGET', KEYS[1], 'token', 'status', 'leaseExpiresAt')
if r[1] ~= ARGV[3] then return false end
if not (r[2] == 'unknown' or (r[2] == 'in_progress' and tonumber(r[3]) <= now)) then return false end
local lease = now + tonumber(ARGV[5])
expires = math.max(expires, lease)
redis.call('HSET', KEYS[1], 'token', ARGV[4], 'status', 'in_progress', 'updatedAt', ms(now),
  'leaseExpiresAt', ms(lease), 'expiresAt', ms(expires))
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HDEL', KEYS[1], 'result')
expire_at(expires)
return redis.call('HGETALL', KEYS[1])
`,
);

/**
 * ARGV[3..8]: token, status, hasResult ("1"/"0"), result, hasError, error, then ARGV[9] ttlMs.
 * Returns {now, tool, fingerprint, createdAt, attempts} (the caller knows the rest, and the result is
 * not sent back), or nil.
 */
export const settleScript = script(
  "settle",
  `
if not live_expires_at() then return false end
local r = redis.call('HMGET', KEYS[1], 'token', 'status')
if r[1] ~= ARGV[3] or not (r[2] == 'in_progress' or r[2] == 'unknown') then return false end
local expires = now + tonumber(ARGV[9])
redis.call('HSET', KEYS[1], 'status', ARGV[4], 'updatedAt', ms(now), 'leaseExpiresAt', ms(now),
  'expiresAt', ms(expires))
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'result', ARGV[6]) else redis.call('HDEL', KEYS[1], 'result') end
if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'error', ARGV[8]) else redis.call('HDEL', KEYS[1], 'error') end
expire_at(expires)
local kept = redis.call('HMGET', KEYS[1], 'tool', 'fingerprint', 'createdAt', 'attempts')
return {now, kept[1], kept[2], kept[3], kept[4]}
`,
);

/** ARGV[3..4]: token, leaseMs. Returns 1 when renewed, else 0. */
export const renewScript = script(
  "renew",
  `
local expires = live_expires_at()
if not expires then return 0 end
local r = redis.call('HMGET', KEYS[1], 'token', 'status')
if r[1] ~= ARGV[3] or r[2] ~= 'in_progress' then return 0 end
local lease = now + tonumber(ARGV[4])
expires = math.max(expires, lease)
redis.call('HSET', KEYS[1], 'updatedAt', ms(now), 'leaseExpiresAt', ms(lease), 'expiresAt', ms(expires))
expire_at(expires)
return 1
`,
);

/** ARGV[1]: token. Returns 1 when it deleted the record, else 0. Takes no clock: release judges no time. */
export const releaseScript = script(
  "release",
  `
local r = redis.call('HMGET', KEYS[1], 'token', 'status')
if r[1] ~= ARGV[1] or not (r[2] == 'in_progress' or r[2] == 'unknown') then return 0 end
return redis.call('DEL', KEYS[1])
`,
  false,
);

/** Returns the live record's fields, or nil. */
export const getScript = script(
  "get",
  `
local record = live_record()
return record or false
`,
);

/** For list: the record's fields whatever its expiry (empty when absent). Takes no clock. */
export const peekScript = script("peek", "return redis.call('HGETALL', KEYS[1])", false);

/** Returns 1 when it deleted the record, else 0. Takes no clock. */
export const deleteScript = script("delete", "return redis.call('DEL', KEYS[1])", false);

/** Returns 1 when the record had expired and was deleted, else 0. */
export const purgeScript = script(
  "purge",
  `
local expires_at = redis.call('HGET', KEYS[1], 'expiresAt')
if expires_at and tonumber(expires_at) <= now then return redis.call('DEL', KEYS[1]) end
return 0
`,
);
