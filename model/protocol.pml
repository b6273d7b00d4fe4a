/*
 * The record protocol of idempotool, for spin: docs/protocol.md explains it, `npm run check:model` runs it.
 *
 * Callers ("workers") share one store and one key. Each runs the call loop of idempotent(): claim, judge
 * what the claim found, take over, ask verify, run the tool under a renewed lease, settle or release. Every
 * decision comes from the inlines of decide.pml, generated from the table of src/core/decide.ts.
 *
 * The store keeps one record (one scope and key: no operation reads two records, so more keys would only
 * interleave independent copies of this one). Its operations are atomic steps that follow the store
 * contract (src/core/store.ts). A clock process moves time forward by one at any moment, so leases pass and
 * windows end between any two steps; expired records may be purged at any moment.
 *
 * Faults, within a budget of FAULTS for the whole run: a command finds the store unreachable (not applied,
 * the worker sees a failure), or is applied with its reply lost (the worker sees a failure), or is applied
 * and sent again later by the client (the worker hears only the second answer). An outage may last through
 * the retries of one settle and still counts as one fault. A worker crashes while it holds a claim (running
 * the tool, or waiting for verify); a crash anywhere else is a worker that takes no further step, and a
 * pause is a worker that takes no step while time passes: the interleavings cover both.
 *
 * Ghost state, kept for the properties and never read by the protocol: the window by the documented rule
 * (ttl after the last sign of life), the effects of each tool in it, and which workers may still have one.
 * The verify hook tells the truth or says it does not know: `completed` only after an effect, `not_executed`
 * or `failed` only when no attempt of the window had an effect or may still have one.
 *
 * -D: WORKERS, TMAX, LEASE, TTL, FAULTS; EFFECT and VERIFY fix the first tool's options (else chosen at the
 * start); LIVENESS builds the run of key_not_blocked. Known bugs, each a flag that must yield a
 * counterexample: BUG_REPLAY_ACROSS_TOOLS, BUG_EXPIRY_FROM_CLAIM, BUG_OWN_CLAIM_UNRECOGNISED,
 * BUG_LOST_WITHOUT_READ_BACK, BUG_TAKEOVER_NOT_CAS, BUG_SETTLE_NOT_FENCED, BUG_IRREVERSIBLE_TAKEOVER.
 */
#include "decide.pml"

#ifndef WORKERS
#define WORKERS 3
#endif
#ifndef TMAX
#define TMAX 2
#endif
#ifndef LEASE
#define LEASE 1
#endif
#ifndef TTL
#define TTL 1
#endif
#ifndef FAULTS
#define FAULTS 1
#endif

/* The store: one record (one scope, one key). status 0 = no record. */
typedef Record {
  byte status;
  bit tool;
  bit fp;
  byte tok;   /* owner token: 2w+1 is worker w's call token, 2w+2 the token of its takeover */
  byte lease; /* lease end */
  byte exp;   /* expiry: the record counts as absent from then on */
  byte res;   /* whose result (or failure) it holds: 1 + 2 tool + fp, 0 none */
#ifdef BUG_EXPIRY_FROM_CLAIM
  byte created;
#endif
}
Record rec;
byte now;
byte faults;

/* What each worker calls: its tool, its arguments (fingerprint), and each tool's options. */
bit wTool[WORKERS];
bit wFp[WORKERS];
byte toolEffect[2];
byte toolVerify[2];

/* Ghost state. */
byte epoch;          /* the window: a new one starts when a claim finds no record and the last one has ended */
byte winEnd;         /* when the window ends, by the documented rule: ttl after the last sign of life */
byte effects[2];     /* effects of each tool in this window (saturates at 2) */
byte pending;        /* workers of this window that hold a claim and may still have an effect */
bit tried;           /* some attempt ran the tool under this record */

#ifdef LIVENESS
byte holder; /* the token of the owner that holds the record, alive, until its outcome is recorded; 0 none */
#define HOLDING(token) holder = token
#define NOT_HOLDING(token) if :: holder == token -> holder = 0 :: else fi
#else
#define HOLDING(token) skip
#define NOT_HOLDING(token) skip
#endif

/* The properties (docs/protocol.md): each assertion sets its flag first, so spin names it when it fails. */
bool effect_once, result_from_same_call, fenced, unknown_stays_unknown, lease_lost_is_true;

#define RESULT(t, f) (1 + 2 * (t) + (f))
#define RERUN_SAFE(e) ((e) == EFFECT_NATIVE_KEY || (e) == EFFECT_OWNED_STORE)
#define LIVE (rec.status != 0 && now < rec.exp)
#define MAX(a, b) ((a) > (b) -> (a) : (b))

/* Store replies */
#define R_FAILED 1
#define R_OK 2
#define R_REFUSED 3
#define R_FOUND 4

/* How a command fares */
#define M_OK 0
#define M_UNREACHABLE 1
#define M_LOST 2
#define M_RESEND 3

/* Inside a worker: who it is, what it calls, its tokens. */
#define W me
#define TL wTool[W]
#define FP wFp[W]
#define EFF toolEffect[TL]
#define VER toolVerify[TL]
#define MYTOK (2 * (W) + 1)
#define TAKETOK (2 * (W) + 2)
#define CRASHED 100

/* The commands, as the trace names them. */
#define C_CLAIM 1
#define C_TAKEOVER 2
#define C_SETTLE 3
#define C_RENEW 4
#define C_RELEASE 5
#define C_READ_BACK 6

/* How the next command fares, within the budget of faults. A resend matters where a second application
   differs from the first (claim, takeover, settle); a read changes nothing, so it can only go unanswered. */
inline pick_fault(mode, command) {
  if
  :: mode = M_OK
#ifndef LIVENESS
  :: faults < FAULTS -> faults++; mode = M_UNREACHABLE
  :: faults < FAULTS && command != C_READ_BACK -> faults++; mode = M_LOST
#endif
  :: faults < FAULTS && (command == C_CLAIM || command == C_TAKEOVER || command == C_SETTLE) ->
     faults++; mode = M_RESEND
  fi;
  if
  :: mode == M_UNREACHABLE -> printf("t%d w%d: {command:%d}: the store is unreachable\n", now, W, command)
  :: mode == M_LOST -> printf("t%d w%d: {command:%d}: the store applies it; the reply is lost\n", now, W, command)
  :: mode == M_RESEND ->
     printf("t%d w%d: {command:%d}: the store applies it; the reply is lost, the client will send it again\n", now, W, command)
  :: else
  fi
}

inline forget_record() {
  rec.status = 0; rec.tool = 0; rec.fp = 0; rec.tok = 0; rec.lease = 0; rec.exp = 0; rec.res = 0;
#ifdef BUG_EXPIRY_FROM_CLAIM
  rec.created = 0;
#endif
  tried = 0
}

/* Expiry of a record whose lease now ends at rec.lease: ttl beyond it, never earlier than before. */
#ifdef BUG_EXPIRY_FROM_CLAIM
#define EXPIRY_AFTER_LEASE MAX(rec.created + TTL, rec.lease)
#else
#define EXPIRY_AFTER_LEASE MAX(rec.exp, rec.lease + TTL)
#endif

/* claim: insert if no live record, else return it (reply R_FOUND: the caller reads rec). */
inline st_claim(t, f, token, reply) {
  if
  :: LIVE -> reply = R_FOUND
  :: else ->
     if
     :: now >= winEnd -> epoch++; effects[0] = 0; effects[1] = 0; pending = 0
     :: else
     fi;
     forget_record();
     rec.status = STATUS_IN_PROGRESS; rec.tool = t; rec.fp = f; rec.tok = token;
     rec.lease = now + LEASE;
#ifdef BUG_EXPIRY_FROM_CLAIM
     rec.created = now;
#endif
     rec.exp = EXPIRY_AFTER_LEASE;
     winEnd = MAX(winEnd, rec.lease + TTL);
     reply = R_OK
  fi
}

/* takeover: compare-and-swap the owner token of a live record that is unknown or whose lease passed. */
inline st_takeover(from, token, reply) {
  if
  :: (LIVE
#ifndef BUG_TAKEOVER_NOT_CAS
      && rec.tok == from
#endif
      && (rec.status == STATUS_UNKNOWN || (rec.status == STATUS_IN_PROGRESS && rec.lease <= now))) ->
     /* (Its own resent takeover finds its own token: no other owner's record.) */
     fenced = (rec.tok == from || rec.tok == token);
     if
     :: !fenced -> printf("t%d w%d: VIOLATED fenced: its takeover, judged on token %d, replaces the claim of token %d\n", now, W, from, rec.tok)
     :: else
     fi;
     assert(fenced);
     rec.status = STATUS_IN_PROGRESS; rec.tok = token; rec.res = 0;
     rec.lease = now + LEASE; rec.exp = EXPIRY_AFTER_LEASE;
     winEnd = MAX(winEnd, rec.lease + TTL);
     reply = R_OK
  :: else -> reply = R_REFUSED
  fi
}

/* settle: fenced by the owner token; the record must be in progress or unknown (even past its window). */
inline st_settle(token, outcome_status, outcome_res, reply) {
  if
  :: (rec.status != 0
#ifndef BUG_SETTLE_NOT_FENCED
      && rec.tok == token
#endif
      && (rec.status == STATUS_IN_PROGRESS || rec.status == STATUS_UNKNOWN)) ->
     fenced = (rec.tok == token);
     if
     :: !fenced -> printf("t%d w%d: VIOLATED fenced: its settle with token %d overwrites the record of token %d\n", now, W, token, rec.tok)
     :: else
     fi;
     assert(fenced);
     rec.status = outcome_status; rec.res = outcome_res; rec.lease = now; rec.exp = now + TTL;
     winEnd = now + TTL;
     reply = R_OK
  :: else -> reply = R_REFUSED
  fi
}

/* renew: fenced; only an in-progress record. */
inline st_renew(token, reply) {
  if
  :: rec.status == STATUS_IN_PROGRESS && rec.tok == token ->
     rec.lease = now + LEASE; rec.exp = EXPIRY_AFTER_LEASE;
     winEnd = MAX(winEnd, rec.lease + TTL);
     reply = R_OK
  :: else -> reply = R_REFUSED
  fi
}

/* release: fenced; deletes an in-progress or unknown record. */
inline st_release(token, reply) {
  if
  :: rec.status != 0 && rec.tok == token && (rec.status == STATUS_IN_PROGRESS || rec.status == STATUS_UNKNOWN) ->
     fenced = (rec.tok == token); assert(fenced);
     forget_record();
     reply = R_OK
  :: else -> reply = R_REFUSED
  fi
}

/* The clock, and a store that purges expired records at any moment. */
active proctype Clock() {
end:
  do
  :: atomic {
       (now < TMAX
#ifdef LIVENESS
        /* An owner that is alive renews before its lease passes (leases are sized above pauses), and
           records its outcome before then once it stops renewing. */
        && !(holder != 0 && holder == rec.tok && rec.lease <= now + 1)
#endif
       ) -> now++; printf("t%d: time passes\n", now)
     }
  :: atomic { rec.status != 0 && now >= rec.exp -> forget_record(); printf("t%d: the store purges the expired record\n", now) }
  od
}

/* A worker starts running the tool under the claim it holds (token `own`, of window `mine`). */
inline begin_run() {
  if
  :: rec.tok == own ->
     /* A record some attempt already ran is run again only where that is safe, or when verify said the
        attempt never took effect. */
     unknown_stays_unknown = (!tried || RERUN_SAFE(EFF) || verdict == OUTCOME_NOT_EXECUTED);
     if
     :: !unknown_stays_unknown -> printf("t%d w%d: VIOLATED unknown_stays_unknown: it runs the tool again on a record an attempt already ran, unverified\n", now, W)
     :: else
     fi;
     assert(unknown_stays_unknown);
     tried = 1
  :: else /* the record moved on while this worker was paused: what it runs now concerns nobody's record */
  fi;
  lastRenew = now; heldAt = now; verdict = 0
}

/* The worker holds a claim of window `mine` (claimed or taken over): it may have an effect from now on. */
inline hold() {
  if
  :: mine == epoch -> pending++
  :: else
  fi;
  HOLDING(own)
}

/* The worker can no longer have an effect (its tool ended, its verify hook said what happened, or it crashed). */
inline end_run() {
  if
  :: mine == epoch -> pending--
  :: else
  fi;
  mine = 0; lost = 0; lastRenew = 0; heldAt = 0
}

inline effect() {
  if
  :: mine == epoch ->
     effect_once = (!(EFF == EFFECT_COMPENSATABLE || EFF == EFFECT_IRREVERSIBLE) || effects[TL] == 0);
     if
     :: !effect_once -> printf("t%d w%d: VIOLATED effect_once: a second effect of tool %d on this key in one window\n", now, W, TL)
     :: else
     fi;
     assert(effect_once);
     if
     :: effects[TL] < 2 -> effects[TL]++
     :: else
     fi
  :: else /* an attempt of an earlier window, paused past it: its effect belongs to that window */
  fi
}

/* A caller is handed a result or a failure: it must be its own tool's, for its own arguments. */
inline hand_out(given) {
  result_from_same_call = (given == RESULT(TL, FP));
  if
  :: !result_from_same_call -> printf("t%d w%d: VIOLATED result_from_same_call: handed the outcome of tool %d, arguments %d\n", now, W, (given - 1) / 2, (given - 1) % 2)
  :: else
  fi;
  assert(result_from_same_call)
}

/* Renew the lease of the claim held (token `own`), and decide what the answer means. */
inline renew_lease() {
  pick_fault(mode, C_RENEW);
  if
  :: mode == M_UNREACHABLE -> answer = ANSWER_STORE_FAILED
  :: else ->
     st_renew(own, reply);
     answer = (mode == M_LOST -> ANSWER_STORE_FAILED : (reply == R_OK -> ANSWER_RENEWED : ANSWER_REFUSED))
  fi;
  /* The worker counts its lease from the last renewal it heard land (or the claim), on its own clock. */
  if
  :: answer == ANSWER_RENEWED -> heldAt = now
  :: else
  fi;
  decide_renewed(answer, (now >= heldAt + LEASE -> LEASE_PASSED : LEASE_LIVE), act);
  printf("t%d w%d: renew (token %d) {answer:%d, lease:%d} -> {act:%d}\n", now, W, own, answer, (now >= heldAt + LEASE -> LEASE_PASSED : LEASE_LIVE), act);
  lost = (act == ACT_LOSE_LEASE);
  if
  :: lost -> NOT_HOLDING(own)
  :: else
  fi;
  lastRenew = now; mode = 0; reply = 0; answer = 0; act = 0
}

/* The claim was answered (reply, and the record it found): decide, in the same step. */
inline judge_claim() {
  mode = 0;
  if
  :: reply == R_FAILED ->
     decide_claim_failed(act);
     printf("t%d w%d: claim failed -> {act:%d}\n", now, W, act)
  :: reply == R_OK ->
     decide_claimed(act);
     printf("t%d w%d: claimed (token %d) -> {act:%d}\n", now, W, MYTOK, act);
     own = MYTOK; mine = epoch; hold()
  :: reply == R_FOUND ->
#ifdef BUG_OWN_CLAIM_UNRECOGNISED
     f_token = TOKEN_OTHER;
#else
     f_token = (rec.tok == MYTOK -> TOKEN_OWN : TOKEN_OTHER);
#endif
     if
     :: f_waited = WAITED_WITHIN
     :: f_waited = WAITED_OUT
     fi;
     decide_found(
#ifdef BUG_REPLAY_ACROSS_TOOLS
       TOOL_SAME,
#else
       (rec.tool == TL -> TOOL_SAME : TOOL_OTHER),
#endif
       (rec.fp == FP -> FINGERPRINT_SAME : FINGERPRINT_OTHER),
       f_token, rec.status, (rec.lease > now -> LEASE_LIVE : LEASE_PASSED), f_waited, EFF, VER, act);
#ifdef BUG_IRREVERSIBLE_TAKEOVER
     if
     :: act == ACT_OUTCOME_UNKNOWN && EFF == EFFECT_IRREVERSIBLE -> act = ACT_TAKE_OVER
     :: else
     fi;
#endif
     printf("t%d w%d: claim found {status:%d} (token %d, lease to %d) -> {act:%d}\n", now, W, rec.status, rec.tok,
       rec.lease, act);
     f_token = 0; f_waited = 0;
     if
     :: act == ACT_RUN -> own = MYTOK; mine = epoch; hold()
     :: act == ACT_TAKE_OVER -> seen = rec.tok; seenRes = RESULT(rec.tool, rec.fp)
     :: act == ACT_REPLAY || act == ACT_REPLAY_FAILURE -> hand_out(rec.res)
     :: else
     fi
  fi;
  reply = 0;
  if
  :: act == ACT_RUN -> begin_run()
  :: else
  fi
}

/* The takeover was answered (`answer`: taken or not): decide, in the same step. */
inline judge_takeover() {
  mode = 0; reply = 0;
  decide_takeover(answer, (seen == MYTOK -> TOKEN_OWN : TOKEN_OTHER), EFF, VER, act);
#ifdef BUG_IRREVERSIBLE_TAKEOVER
  if
  :: (act == ACT_OUTCOME_UNKNOWN || act == ACT_VERIFY) && EFF == EFFECT_IRREVERSIBLE -> act = ACT_RUN
  :: else
  fi;
#endif
  printf("t%d w%d: takeover from token %d to %d {taken:%d} -> {act:%d}\n", now, W, seen, TAKETOK, answer, act);
  answer = 0;
  if
  :: act == ACT_LOOK_AGAIN -> seen = 0; seenRes = 0
  :: act == ACT_RUN -> own = TAKETOK; mine = epoch; hold(); begin_run()
  :: act == ACT_VERIFY -> own = TAKETOK; mine = epoch; hold(); lastRenew = now; heldAt = now
  :: else
  fi
}

/* The takeover's reply: taken, refused (read back: it may be this call's own, resent), or a store failure. */
inline takeover_answered() {
  if
  :: reply == R_OK -> answer = TAKEN_YES; judge_takeover()
  :: else
  fi
}

/* The settle was answered (`answer`): decide, in the same step, and check what the caller is told. */
inline judge_settle() {
  mode = 0; reply = 0;
  decide_settled(st, (afterVerify -> AFTER_VERIFY : AFTER_RUN), answer, act);
  printf("t%d w%d: settle {status:%d} (token %d) {answer:%d} -> {act:%d}\n", now, W, st, own, answer, act);
  if
  :: (act == ACT_RETURN_RESULT || act == ACT_REPLAY || act == ACT_THROW_FAILURE ||
      act == ACT_REPLAY_FAILURE) ->
     hand_out(res)
  :: act == ACT_LEASE_LOST ->
     /* Told that another owner holds the record: its own outcome must not be what the record holds. */
     lease_lost_is_true = !(LIVE && rec.tok == own && rec.status == st);
     if
     :: !lease_lost_is_true -> printf("t%d w%d: VIOLATED lease_lost_is_true: told lease_lost, yet the record holds its own settle\n", now, W)
     :: else
     fi;
     assert(lease_lost_is_true)
  :: else
  fi
}

/* The settle's reply: settled and decided, refused (to be read back), or a store failure (to be retried). */
inline settle_answered() {
  if
  :: reply == R_OK -> answer = ANSWER_SETTLED; judge_settle()
#ifdef BUG_LOST_WITHOUT_READ_BACK
  :: reply == R_REFUSED -> answer = ANSWER_LOST; judge_settle()
#endif
  :: else
  fi
}

proctype Worker(byte me) {
  byte act, mode, reply, answer;
  byte own;       /* the token of the claim this worker holds */
  byte seen;      /* the token of the record it judged stale */
  byte seenRes;   /* whose call that record was: what verify finds */
  byte verdict;   /* what verify said */
  byte st, res;   /* the outcome being settled */
  bit afterVerify;
  byte tries;     /* settle attempts */
  byte lastRenew;
  byte heldAt;    /* when it last knew its lease held: its claim, or a renewal it heard land */
  byte mine;      /* the window of the claim it holds */
  bit lost;       /* a renewal was refused, or failed past the lease: the tool's signal aborted, renewals stop */
  bit outage;     /* its last settle found the store unreachable: the retry may too */
  byte f_token, f_waited, outcome;

claim:
  atomic {
    pick_fault(mode, C_CLAIM);
    if
    :: mode == M_UNREACHABLE -> reply = R_FAILED
    :: else ->
       st_claim(TL, FP, MYTOK, reply);
       if
       :: mode == M_LOST -> reply = R_FAILED
       :: else
       fi
    fi;
    if
    :: mode != M_RESEND -> judge_claim()
    :: else
    fi
  }
  if
  :: mode == M_RESEND -> /* later, the client sends it again */
     atomic { printf("t%d w%d: claim sent again\n", now, W); st_claim(TL, FP, MYTOK, reply); judge_claim() }
  :: else
  fi;
  if
  :: act == ACT_RUN -> goto execute
  :: act == ACT_RELEASE_UNRUN -> goto release_unrun
  :: act == ACT_TAKE_OVER -> goto take_over
  :: act == ACT_WAIT -> act = 0; goto claim
  :: (act == ACT_CONFLICT || act == ACT_REPLAY || act == ACT_REPLAY_FAILURE || act == ACT_GIVE_UP ||
      act == ACT_OUTCOME_UNKNOWN) -> goto done
  fi;

take_over:
  atomic {
    act = 0;
    pick_fault(mode, C_TAKEOVER);
    if
    :: mode == M_UNREACHABLE -> reply = R_FAILED
    :: else ->
       st_takeover(seen, TAKETOK, reply);
       if
       :: mode == M_LOST -> reply = R_FAILED
       :: else
       fi
    fi;
    if
    :: mode != M_RESEND -> takeover_answered()
    :: else
    fi
  }
  if
  :: mode == M_RESEND ->
     atomic { printf("t%d w%d: takeover sent again\n", now, W); st_takeover(seen, TAKETOK, reply); takeover_answered() }
  :: else
  fi;
  if
  :: reply == R_FAILED -> printf("t%d w%d: takeover failed: store_unavailable\n", now, W); goto done
  :: reply == R_REFUSED ->
     atomic {
       pick_fault(mode, C_READ_BACK);
       if
       :: mode == M_UNREACHABLE || mode == M_LOST -> reply = R_FAILED
       :: else -> answer = (LIVE && rec.tok == TAKETOK -> TAKEN_YES : TAKEN_NO); judge_takeover()
       fi
     }
     if
     :: reply == R_FAILED -> printf("t%d w%d: read-back failed: store_unavailable\n", now, W); goto done
     :: else
     fi
  :: else
  fi;
  if
  :: act == ACT_LOOK_AGAIN -> act = 0; goto claim
  :: act == ACT_RUN -> goto execute
  :: act == ACT_VERIFY -> act = 0; goto verify
  :: act == ACT_OUTCOME_UNKNOWN -> goto done
  fi;

verify: /* the hook answers while this worker holds the claim, renewed */
  do
  :: atomic { !lost && now > lastRenew -> renew_lease() }
  :: atomic {
       /* The hook tells the truth or does not know: `completed` only after an effect, `not_executed` and
          `failed` only when no attempt of this window had one or still may (no other worker holds a claim
          it may still run under). About a window that has ended, which this model no longer tracks, it may
          say anything. */
       if
       :: mine != epoch || effects[(seenRes - 1) / 2] > 0 -> verdict = OUTCOME_COMPLETED
       :: mine != epoch || (effects[(seenRes - 1) / 2] == 0 && pending == 1) -> verdict = OUTCOME_NOT_EXECUTED
       :: mine != epoch || (effects[(seenRes - 1) / 2] == 0 && pending == 1) -> verdict = OUTCOME_FAILED
       :: verdict = OUTCOME_UNKNOWN
       :: verdict = OUTCOME_HOOK_FAILED
       fi;
       /* A renewal fenced by the token says whether this worker still holds the record. */
       st_renew(own, reply);
       decide_verified(verdict, (reply == R_OK -> CLAIM_HELD : CLAIM_LOST), act);
       printf("t%d w%d: verify said {outcome:%d, claim:%d} -> {act:%d}\n", now, W, verdict, (reply == R_OK -> CLAIM_HELD : CLAIM_LOST), act);
       reply = 0;
       lastRenew = 0; lost = 0;
       if
       :: act == ACT_RUN -> begin_run()
       :: act == ACT_SETTLE_COMPLETED -> st = STATUS_COMPLETED; res = seenRes
       :: act == ACT_SETTLE_FAILED -> st = STATUS_FAILED; res = seenRes
       :: act == ACT_SETTLE_UNKNOWN -> st = STATUS_UNKNOWN; res = 0
       :: act == ACT_LEASE_LOST
       fi;
       afterVerify = (act != ACT_RUN);
       if
       :: afterVerify -> end_run(); verdict = 0
       :: else
       fi;
       break
     }
#ifndef LIVENESS
  :: atomic { end_run(); act = CRASHED; printf("t%d w%d: crashes while verifying\n", now, W); break }
#endif
  od;
  if
  :: act == ACT_RUN -> goto execute
  :: act == CRASHED -> goto done
  :: act == ACT_LEASE_LOST -> printf("t%d w%d: lease_lost (verify answered after the record was taken)\n", now, W); goto done
  :: else -> goto settle
  fi;

execute: /* the tool runs under the claim, renewed */
  do
  :: atomic { !lost && now > lastRenew -> renew_lease() }
  :: atomic {
       if
       :: outcome = OUTCOME_RETURNED; effect()
       :: outcome = OUTCOME_DECLARED_FAILED
       :: outcome = OUTCOME_DECLARED_NOT_EXECUTED
#ifndef LIVENESS
       :: outcome = OUTCOME_THREW
       :: outcome = OUTCOME_THREW; effect()
#endif
       fi;
       end_run();
       decide_tool(outcome, EFF, act);
       printf("t%d w%d: the tool {outcome:%d} -> {act:%d}\n", now, W, outcome, act);
       outcome = 0;
       if
       :: act == ACT_SETTLE_COMPLETED -> st = STATUS_COMPLETED; res = RESULT(TL, FP)
       :: act == ACT_SETTLE_FAILED -> st = STATUS_FAILED; res = RESULT(TL, FP)
       :: act == ACT_SETTLE_UNKNOWN -> st = STATUS_UNKNOWN; res = 0
       :: act == ACT_RELEASE
       fi;
       break
     }
#ifndef LIVENESS
  :: atomic { end_run(); act = CRASHED; printf("t%d w%d: crashes while running the tool\n", now, W); break }
#endif
  od;
  if
  :: act == ACT_RELEASE -> goto release
  :: act == CRASHED -> goto done
  :: else -> act = 0; goto settle
  fi;

settle: /* settle under the owner token; a refusal is read back; a store error is tried up to three times */
  atomic {
    if
    :: outage -> mode = M_UNREACHABLE; printf("t%d w%d: settle: the store is still unreachable\n", now, W)
    :: true -> outage = 0; pick_fault(mode, C_SETTLE)
    fi;
    /* An outage is one fault, however many of the retries it spans. */
    outage = (mode == M_UNREACHABLE);
    if
    :: mode == M_UNREACHABLE -> reply = R_FAILED
    :: else ->
       st_settle(own, st, res, reply);
       if
       :: mode == M_LOST -> reply = R_FAILED
       :: else
       fi
    fi;
    if
    :: mode != M_RESEND -> settle_answered()
    :: else
    fi
  }
  if
  :: mode == M_RESEND ->
     atomic { printf("t%d w%d: settle sent again\n", now, W); st_settle(own, st, res, reply); settle_answered() }
  :: else
  fi;
  if
  :: reply == R_REFUSED ->
     /* The refusal may be this owner's own settle, applied once already: read the record back. */
     atomic {
       pick_fault(mode, C_READ_BACK);
       if
       :: mode == M_UNREACHABLE || mode == M_LOST -> reply = R_FAILED
       :: else ->
          answer = (LIVE && rec.tok == own && rec.status == st -> ANSWER_SETTLED : ANSWER_LOST);
          judge_settle()
       fi
     }
  :: else
  fi;
  if
  :: reply == R_FAILED ->
     mode = 0; reply = 0; tries++;
     if
     :: tries < 3 -> goto settle
     :: else -> atomic { answer = ANSWER_STORE_FAILED; judge_settle() }
     fi
  :: else
  fi;
  goto done;

release: /* the effect certainly did not happen: free the key, fenced by the owner token */
  atomic {
    pick_fault(mode, C_RELEASE);
    if
    :: mode == M_UNREACHABLE
    :: else -> st_release(own, reply) /* a resent release finds nothing left to free */
    fi;
    printf("t%d w%d: release (token %d)\n", now, W, own)
  }
  goto done;

release_unrun: /* the claim may have landed: free it by this call's token, trying until the store answers */
  atomic {
    act = 0;
    pick_fault(mode, C_RELEASE);
    if
    :: mode == M_UNREACHABLE -> reply = R_FAILED
    :: else ->
       st_release(MYTOK, reply);
       if
       :: mode == M_LOST -> reply = R_FAILED
       :: else
       fi
    fi;
    printf("t%d w%d: release the claim it may have made (token %d)\n", now, W, MYTOK);
    mode = 0
  }
  if
  :: reply == R_FAILED -> reply = 0; goto release_unrun
  :: else
  fi;

done:
  atomic {
    NOT_HOLDING(own);
    act = 0; mode = 0; reply = 0; answer = 0; own = 0; seen = 0; seenRes = 0; verdict = 0;
    st = 0; res = 0; afterVerify = 0; tries = 0; lastRenew = 0; heldAt = 0; mine = 0; lost = 0; outage = 0
  }
}

init {
  atomic {
    byte w;
    effect_once = true; result_from_same_call = true; fenced = true;
    unknown_stays_unknown = true; lease_lost_is_true = true;
#ifdef EFFECT
    toolEffect[0] = EFFECT;
#else
    if
    :: toolEffect[0] = EFFECT_IRREVERSIBLE
    :: toolEffect[0] = EFFECT_COMPENSATABLE
    :: toolEffect[0] = EFFECT_OWNED_STORE
    :: toolEffect[0] = EFFECT_NATIVE_KEY
    fi;
#endif
#ifdef VERIFY
    toolVerify[0] = VERIFY;
#else
    if
    :: RERUN_SAFE(toolEffect[0]) -> toolVerify[0] = VERIFY_NONE /* never consulted: one case is enough */
    :: else ->
       if
       :: toolVerify[0] = VERIFY_NONE
       :: toolVerify[0] = VERIFY_GIVEN
       fi
    fi;
#endif
    toolEffect[1] = EFFECT_IRREVERSIBLE; toolVerify[1] = VERIFY_NONE;
#if WORKERS > 2
    /* The last worker calls the same tool with other arguments, or another tool, on the same key. */
    if
    :: wTool[WORKERS - 1] = 1; wFp[WORKERS - 1] = 0
    :: wTool[WORKERS - 1] = 0; wFp[WORKERS - 1] = 1
    :: wTool[WORKERS - 1] = 0; wFp[WORKERS - 1] = 0
    fi;
#endif
    for (w : 0 .. WORKERS - 1) {
      run Worker(w)
    };
    w = 0
  }
}

#ifdef LIVENESS
/* A key whose owner is alive and whose store answers ends up open: no record, or a settled one. */
#define KEY_OPEN (rec.status == 0 || rec.status == STATUS_COMPLETED || rec.status == STATUS_FAILED)
ltl key_not_blocked { <> [] KEY_OPEN }
#endif
