//! Ownership shared by replicas in Redis (`[state] backend = "redis"`): who owns which task
//! and context, which agent serves it, the workspace a context is bound to, and which
//! context is busy. Every decision is one Lua script, so it is atomic across replicas.
//!
//! Keys (after `key_prefix`; standalone Redis or Valkey, not Cluster: the scripts name keys
//! they compute):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `t:{task}` | hash | `o` owner, `c` context (the agent's id), `u` agent name, `s` state, `ts` status timestamp (µs) |
//! | `c:{context}` | hash | `o` owner, `u` agent name, `w` workspace (`-` the agent's default, `=path`; absent: not bound yet), `cl` the id the caller chose; while the context is small, `n` its task count and per task `t:{task}` = `{ts} {state}` |
//! | `b:{context}` | string, PX lease | the running turn: `token\ntask` |
//! | `lt:{n}:{owner}` | zset | the owner's tasks by status timestamp |
//! | `ls:{n}:{owner}:{state}` | zset | the same, per state |
//! | `lc:{context}` | zset | a context's tasks, once it has more than [`SMALL_CONTEXT`] |
//! | `lcs:{n}:{context}:{state}` | zset | the same, per state (`n`: the context id's length) |
//! | `le:{n}:{owner}` | zset | the owner's tasks by when their keys expire (ms, Redis's clock); a member is `{len}:{task}{len}:{context}{state}`; and its contexts without tasks, `0:{len}:{context}` |
//! | `xt:{task}`, `xc:{context}` | string, PX retention | the owner of a task or context the per-owner cap took out |
//! | `lx:{n}:{owner}` | zset | the owner's `xt:`/`xc:` keys by when they were written, at most as many as the cap (and 31 more) |
//!
//! Tasks, contexts and the indexes expire `task_retention_ms` after their last write (so a
//! finished task's owner is remembered that long, then forgotten with its ids: an id is
//! claimed again only by whoever names it first, as with a fresh Redis). A busy lease lives
//! `busy_lease_ms` unless the turn's replica renews it (every third of it while the turn
//! streams), so a replica that dies mid-turn frees the context within one lease.
//! Index entries of expired tasks go two ways. Each LEARN of a task (and each script that
//! adds an entry to `le`: a new context without tasks, by LEARN or TURN) first takes up to
//! [`REAP_PER_LEARN`] of the owner's tasks whose keys expired (by `le`) out of every index
//! that holds them, so an active owner's indexes hold its live tasks and the few that
//! expired since its last answers; an idle owner's expire whole. And a listing removes the
//! expired entries it meets (those written before `le`, 2026-12-06, or by an older replica),
//! passing over at most [`LIST_PASS_BUDGET`] of them in one call: then the page ends early
//! with a token that goes on from there, so no index however stale makes one call block
//! Redis. `totalSize` may count recently expired tasks for a while.
//! An owner's share of Redis is bounded by `state.max_tasks_per_owner` entries of `le`: its
//! tasks, and its contexts without tasks (made by a turn on a new context id, or by an
//! answer that names a new context with no task; and a context whose last task expired
//! while its turns keep it, due when its key expires). A new entry past the cap first takes
//! out the owner's least recently written ([`EVICT_PER_LEARN`] at most), and a context goes
//! with the last of its tasks so taken out, or stays as an entry of its own while a turn
//! holds it (written now), so contexts are bounded with the tasks (before 2026-12-07 every
//! evicted task's context, and every context without tasks, stayed for the retention).
//! What the cap takes out leaves its owner behind (`xt:`, `xc:`) for a retention, so that
//! another owner's answer naming that id is refused ('foreign'), as while the key lived:
//! every replica's cache may still hold the id as its owner's until the key would have
//! expired (as the memory registry remembers the owners of the ids it evicts). At most
//! as many as the cap per owner (and 31 more: trimmed 32 at a time; twice that while marks
//! outlive their list, whose life is renewed when it is trimmed); past that the oldest go
//! (as the memory registry keeps 4 per entry in 16 bytes each; a Redis key and its `lx:`
//! entry take about 150). Only the task and context an answer brings are checked against
//! them (an id an answer only refers to, without a context, is not). Their cost: one `MGET` in every LEARN that brings a new task or
//! context, and 3–4 commands more per id the cap takes out.
//! Every turn, and every answer that names a context and no task, renews `le` with the
//! context it keeps, so an owner idle for a whole retention but for turns on contexts it has
//! (no new task, no new context) keeps them counted (before 2026-12-07 `le` then expired
//! whole while those contexts lived on, uncounted). A turn or an answer that names a task
//! its small context's hash does not hold (the hash expired before the task and was made
//! again) writes it there and counts the tasks the hash holds, so that the context is
//! counted as one without tasks only when its last task expires; a turn on a context
//! without tasks that finds the owner's expiry index gone (lost before 2026-12-07) counts
//! the context again.
//! Every ListTasks query reads one index that holds exactly the tasks it asks for (the
//! owner's, one state's of them, a context's, one state's of a context's): a page costs
//! the tasks it returns and `totalSize` is the index's `ZCARD` or `ZCOUNT`, never a walk of
//! a context's tasks (which blocked Redis, for every replica, as long as a context was big).
//! `lcs` keys came with that (2026-12-03): a task learned before it is not listed by context
//! and state until an answer names it again.
//!
//! A small context (most have one task) keeps its tasks in its own hash instead (`n` and
//! `t:{task}` fields, written in the `HSET` the context needs anyway): two sorted sets and
//! four commands fewer per new task, two keys less per context. Its listing reads the hash
//! (at most [`SMALL_CONTEXT`] tasks, sorted in the script). The task that would make it
//! [`SMALL_CONTEXT`] + 1 moves them all to `lc`/`lcs` for good (`n` leaves the hash). A
//! context without `n` keeps its tasks in the sorted sets: every context written before
//! this form (2026-12-03), and the promoted ones. While replicas of both versions run (a
//! rolling upgrade), an older one adds a small context's next task to `lc`: a listing that
//! finds `lc` beside `n` moves the hash's tasks there first, so nothing goes unlisted (a
//! task whose state the older replica changed may be counted under its old state in
//! `totalSize` of a context and state until the task's retention ends).

use std::sync::Arc;
use std::time::Duration;

use super::redis::{RedisStore, StateUnavailable};

/// The most tasks a context keeps in its own hash (see the module's doc).
pub const SMALL_CONTEXT: usize = 16;
const SMALL_CONTEXT_ARG: &str = "16";

/// The most index entries one LIST call passes over without listing them (expired tasks,
/// mostly) before it ends the page early, saying where: the next page goes on from there.
pub const LIST_PASS_BUDGET: usize = 256;
const LIST_PASS_BUDGET_ARG: &str = "256";

/// The most expired entries one script takes out of the owner's indexes (each new task or
/// context adds one, so the indexes shrink back to the live tasks and contexts).
pub const REAP_PER_LEARN: usize = 4;

/// The most entries (tasks, contexts without tasks) one script takes out of an owner over
/// `state.max_tasks_per_owner` (each new one adds one, and [`REAP_PER_LEARN`] bounds what
/// the same script reaps).
pub const EVICT_PER_LEARN: usize = 4;

/// Lua shared by LEARN and LIST: `entry` reads a small context's task field (`t:{task}` =
/// `{ts} {state}`); `promote` moves those tasks from its hash to its sorted sets, and drops
/// `n` and the fields.
macro_rules! promote_lua {
    () => {
        r#"
local function entry(v)
  local sp = string.find(v, ' ', 1, true) or (#v + 1)
  return string.sub(v, 1, sp - 1), string.sub(v, sp + 1)
end
local function promote(p, ck, ctx, ret)
  local h = redis.call('HGETALL', ck)
  local all, by, gone = {}, {}, {'n'}
  for i = 1, #h, 2 do
    local f, v = h[i], h[i + 1]
    if string.sub(f, 1, 2) == 't:' then
      local ts, st = entry(v)
      local id = string.sub(f, 3)
      all[#all + 1] = ts; all[#all + 1] = id
      if not by[st] then by[st] = {} end
      local l = by[st]
      l[#l + 1] = ts; l[#l + 1] = id
      gone[#gone + 1] = f
    end
  end
  if #all > 0 then
    local lc = p .. 'lc:' .. ctx
    redis.call('ZADD', lc, unpack(all))
    redis.call('PEXPIRE', lc, ret)
    for st, l in pairs(by) do
      local k = p .. 'lcs:' .. #ctx .. ':' .. ctx .. ':' .. st
      redis.call('ZADD', k, unpack(l))
      redis.call('PEXPIRE', k, ret)
    end
  end
  redis.call('HDEL', ck, unpack(gone))
end
"#
    };
}

/// Lua of LEARN and TURN: the owner's expiry index `le:{n}:{owner}` (see the module's doc).
/// A member names a task, its context and its state (`due_member`), so that `reap` can take
/// a task whose key expired out of every index that holds it: the owner's (`lt`, `ls`), its
/// context's (`lc`, `lcs`, or the small context's field). A context without tasks has a
/// member of its own (`bare_member`, an empty task), so that the owner's cap counts it too.
/// At most [`REAP_PER_LEARN`] entries per call.
macro_rules! reap_lua {
    () => {
        r#"
local function due_member(task, ctx, state)
  return #task .. ':' .. task .. #ctx .. ':' .. ctx .. state
end
local function bare_member(ctx)
  return due_member('', ctx, '')
end
local function read_member(m)
  local a = string.find(m, ':', 1, true)
  local n = tonumber(string.sub(m, 1, a - 1))
  local task = string.sub(m, a + 1, a + n)
  local rest = a + n + 1
  local b = string.find(m, ':', rest, true)
  local k = tonumber(string.sub(m, rest, b - 1))
  return task, string.sub(m, b + 1, b + k), string.sub(m, b + k + 1)
end
-- An entry whose key lives on (kept by a replica that writes no expiry index, or a context
-- without tasks that its turns keep): due again when the key expires.
local function due_again(le, key, now, m)
  local left = redis.call('PTTL', key)
  if left < 0 then left = 0 end
  redis.call('ZADD', le, now + left + 1, m)
end
-- Whether the owner's context `ck` (`ctx`) lives without tasks.
local function bare(p, who, ck, ctx)
  local c = redis.call('HMGET', ck, 'o', 'n')
  if c[1] ~= who then return false end
  if c[2] then return c[2] == '0' end
  return redis.call('EXISTS', p .. 'lc:' .. ctx) == 0
end
-- How many tasks a small context's hash `ck` holds (its `t:` fields), whatever its `n`
-- says: read where `n` is found wrong (a hash made again, or by an older replica).
local function tasks_in(ck)
  local n = 0
  for _, f in ipairs(redis.call('HKEYS', ck)) do
    if string.sub(f, 1, 2) == 't:' then n = n + 1 end
  end
  return n
end
-- `emptied` (the cap's eviction): gets the contexts this call leaves without tasks, for the
-- caller to decide; without it, such a context that lives on (its turns keep it) gets an
-- entry of its own, due when its key expires, so that the cap still counts it.
local function reap(p, who, now, emptied)
  local owner = #who .. ':' .. who
  local le = p .. 'le:' .. owner
  local due = redis.call('ZRANGEBYSCORE', le, '-inf', now, 'LIMIT', 0, 4)
  for _, m in ipairs(due) do
    local id, mctx, mst = read_member(m)
    local ck = p .. 'c:' .. mctx
    if id == '' then
      -- A context without tasks (`bare_member`): gone, or it has tasks now (each has its
      -- own entry).
      if bare(p, who, ck, mctx) then due_again(le, ck, now, m)
      else redis.call('ZREM', le, m) end
    else
      local tk = p .. 't:' .. id
      local cur = redis.call('HMGET', tk, 'o', 'c', 's')
      if cur[1] == who and cur[2] == mctx then
        due_again(le, tk, now, m)
      else
        redis.call('ZREM', le, m)
        -- The id may be the owner's again, learned anew in another context: its own
        -- entries stay.
        if cur[1] ~= who then redis.call('ZREM', p .. 'lt:' .. owner, id) end
        if cur[1] ~= who or cur[3] ~= mst then
          redis.call('ZREM', p .. 'ls:' .. owner .. ':' .. mst, id)
        end
        if redis.call('HGET', ck, 'o') == who then
          redis.call('ZREM', p .. 'lc:' .. mctx, id)
          redis.call('ZREM', p .. 'lcs:' .. #mctx .. ':' .. mctx .. ':' .. mst, id)
          if redis.call('HDEL', ck, 't:' .. id) == 1 and redis.call('HEXISTS', ck, 'n') == 1 then
            redis.call('HINCRBY', ck, 'n', -1)
          end
          -- Left without tasks, by this removal or a listing's before it (a listing takes
          -- expired ids out of the context it lists, with no entry for the context).
          local empty = bare(p, who, ck, mctx)
          if empty and emptied then emptied[#emptied + 1] = mctx
          elseif empty then due_again(le, ck, now, bare_member(mctx)) end
        end
      end
    end
  end
end
"#
    };
}

/// Lua of LEARN and TURN (after [`reap_lua`]): `evict(p, who, now, ret, cap, task, ctx)`
/// makes room in the owner's expiry index for one more entry (a task, or a context without
/// tasks) past `state.max_tasks_per_owner`: up to [`EVICT_PER_LEARN`] of its least recently
/// written entries go, tasks with their keys and index entries (`reap`), and with them
/// their contexts when left without tasks, as contexts without tasks go (not while a turn
/// holds one: it stays an entry, as written now; nor `ctx`, the one being written). True
/// when it took anything out (`ctx`'s task count may have changed: read it again).
/// `count_bare(p, who, now, ret, cap, ctx)`: the entry of a new context without tasks.
macro_rules! evict_lua {
    () => {
        r#"
-- Deletes `key` of the owner's, which the cap takes out, leaving its owner in `mark` for a
-- retention (another owner's answer naming the id is refused until then); at most `cap`
-- marks per owner (trimmed 32 at a time past it), the oldest go.
local function take_out(p, who, now, ret, cap, key, mark)
  redis.call('DEL', key)
  redis.call('SET', mark, who, 'PX', ret)
  local lx = p .. 'lx:' .. #who .. ':' .. who
  redis.call('ZADD', lx, now, mark)
  local n = redis.call('ZCARD', lx)
  -- (the list's own life is renewed when it is made and trimmed: it may expire before the
  -- last marks, which then go by their own expiry, uncounted: at most twice the bound)
  if n == 1 then redis.call('PEXPIRE', lx, ret) end
  if n - cap >= 32 then
    -- Marks older than a retention went by themselves (their names may be another
    -- owner's marks by now): out of the list first. Then the oldest, 256 at most per call
    -- (a cap lowered since shrinks the list over several calls).
    redis.call('ZREMRANGEBYSCORE', lx, '-inf', '(' .. (now - ret))
    local over = math.min(redis.call('ZCARD', lx) - cap, 256)
    if over > 0 then
      redis.call('DEL', unpack(redis.call('ZRANGE', lx, 0, over - 1)))
      redis.call('ZREMRANGEBYRANK', lx, 0, over - 1)
    end
    redis.call('PEXPIRE', lx, ret)
  end
end
-- Deletes the owner's context `ctx` when it has no tasks left; true when a turn holds it
-- (then it stays).
local function context_gone(p, who, now, ret, cap, ctx)
  local ck = p .. 'c:' .. ctx
  if not bare(p, who, ck, ctx) then return false end
  if redis.call('EXISTS', p .. 'b:' .. ctx, p .. 'bf:' .. ctx) > 0 then return true end
  take_out(p, who, now, ret, cap, ck, p .. 'xc:' .. ctx)
  return false
end
local function evict(p, who, now, ret, cap, task, ctx)
  local le = p .. 'le:' .. #who .. ':' .. who
  local over = redis.call('ZCARD', le) - cap + 1
  if over <= 0 then return false end
  local evicted = {}
  for _, m in ipairs(redis.call('ZRANGE', le, 0, math.min(over, 4) - 1)) do
    local id, mctx = read_member(m)
    if id == '' then
      -- A context without tasks goes (its entry with `reap`), unless a turn holds it: then
      -- it counts as written now, behind the others.
      if mctx ~= ctx then
        local held = context_gone(p, who, now, ret, cap, mctx)
        redis.call('ZADD', le, held and now + ret or 0, m)
      end
    elseif id ~= task then
      -- Only the owner's own task in that context (an expired id may be another owner's
      -- since): `reap` takes the entry out either way.
      local cur = redis.call('HMGET', p .. 't:' .. id, 'o', 'c')
      if cur[1] == who and cur[2] == mctx then
        take_out(p, who, now, ret, cap, p .. 't:' .. id, p .. 'xt:' .. id)
        evicted[mctx] = true
      end
      redis.call('ZADD', le, 0, m)
    end
  end
  local emptied = {}
  reap(p, who, now, emptied)
  -- A context left without tasks goes with the last one taken out here, or stays counted
  -- (a turn holds it: as written now; its tasks expired while its turns kept it: until its
  -- key expires).
  for _, c in ipairs(emptied) do
    if c ~= ctx then
      if not evicted[c] then due_again(le, p .. 'c:' .. c, now, bare_member(c))
      elseif context_gone(p, who, now, ret, cap, c) then redis.call('ZADD', le, now + ret, bare_member(c)) end
    end
  end
  return true
end
-- A new context without tasks, `ctx`: an entry of its own in the owner's expiry index,
-- within the cap (what expired and what the cap takes out go first).
local function count_bare(p, who, now, ret, cap, ctx)
  reap(p, who, now)
  evict(p, who, now, ret, cap, '', ctx)
  local le = p .. 'le:' .. #who .. ':' .. who
  redis.call('ZADD', le, now + ret, bare_member(ctx))
  redis.call('PEXPIRE', le, ret)
end
"#
    };
}

/// `release(p, ctx, token)`: ends the lease `token` holds on a context, if it still holds
/// it: the running turn's (`b:`), or a follow-up's (`bf:`); 1 when it held one.
macro_rules! release_lua {
    () => {
        r#"
local function release(p, ctx, token)
  local released = 0
  local bk = p .. 'b:' .. ctx
  local v = redis.call('GET', bk)
  if v and string.sub(v, 1, #token + 1) == token .. '\n' then
    redis.call('DEL', bk)
    released = 1
  end
  -- (both: a follow-up that took the lease when its turn's answer named the context, LEARN's
  -- `SET NX`, holds the two)
  local fk = p .. 'bf:' .. ctx
  if redis.call('HDEL', fk, token) == 1 then
    released = 1
    if redis.call('HLEN', fk) <= 1 then redis.call('DEL', fk) end
  end
  return released
end
"#
    };
}

/// `now_ms()`: Redis's own clock in milliseconds (`TIME`), which every replica shares.
macro_rules! now_ms_lua {
    () => {
        r#"
local function now_ms()
  local tm = redis.call('TIME')
  return tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
end
"#
    };
}

/// `followers(fk, now)`: the task of a context's live follow-ups (`bf:`), or false when
/// none lives; expired holders are dropped on the way (bounded: one caller's follow-ups on
/// one context, each holding a request slot).
macro_rules! followers_lua {
    () => {
        r#"
local function followers(fk, now)
  local f = redis.call('HGETALL', fk)
  local task, live = false, 0
  for i = 1, #f, 2 do
    if f[i] == 't' then
      task = f[i + 1]
    elseif (tonumber(f[i + 1]) or 0) > now then
      live = live + 1
    else
      redis.call('HDEL', fk, f[i])
    end
  end
  if live == 0 then return false end
  return task
end
"#
    };
}

/// Begins a turn on a context the request names. ARGV: prefix, context, principal, task or
/// '', workspace, lease token, lease ms, retention ms, the caller's id for it or '', the
/// agent this replica would pick for it or '', the most entries the owner keeps (a context
/// the turn makes counts, as LEARN's). Returns {verdict, agent name or ''};
/// verdict: ok | follow | not_found | workspace | mismatch | busy. A turn that begins on a
/// context no agent serves yet binds it to the picked agent at once (as the memory registry
/// does from the first byte sent): a retry through another replica, after a turn that
/// ended before its agent's first answer, reaches the same agent.
///
/// A context is busy while its lease (`b:`, `token\ntask`) or a follow-up's lives. A
/// follow-up (a message on the running turn's own task: the agent queues it) is a holder
/// of its own in `bf:` (a hash: `t` the task, each holder's token its expiry in Redis's
/// milliseconds), renewed and released like the lease ([`RENEW`], [`RELEASE`]), so the
/// context stays busy until the last of them ends, whichever replica serves it.
const TURN: &str = concat!(
    now_ms_lua!(),
    followers_lua!(),
    reap_lua!(),
    evict_lua!(),
    r#"
local p, ctx, who, task = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ck = p .. 'c:' .. ctx
local c = redis.call('HMGET', ck, 'o', 'w', 'u', 'n', 't:' .. task)
if c[1] and c[1] ~= who then return {'not_found', ''} end
if c[1] and c[2] and c[2] ~= ARGV[5] then return {'workspace', ''} end
local u = c[3] or ''
local t = false
if task ~= '' then
  t = redis.call('HMGET', p .. 't:' .. task, 'o', 'c', 'u', 's', 'ts')
  if not t[1] or t[1] ~= who then return {'not_found', ''} end
  if t[2] ~= ctx then return {'mismatch', ''} end
  u = t[3] or u
end
local bk = p .. 'b:' .. ctx
local fk = p .. 'bf:' .. ctx
local now = now_ms()
local busy = redis.call('GET', bk)
local running = false
if busy then
  local nl = string.find(busy, '\n', 1, true)
  running = nl and string.sub(busy, nl + 1) or ''
else
  running = followers(fk, now)
end
if running then
  if task ~= '' and running == task then
    redis.call('HSET', fk, 't', task, ARGV[6], now + tonumber(ARGV[7]))
    redis.call('PEXPIRE', fk, ARGV[7])
    return {'follow', u}
  end
  return {'busy', ''}
end
redis.call('SET', bk, ARGV[6] .. '\n' .. task, 'PX', ARGV[7])
local le = p .. 'le:' .. #who .. ':' .. who
local set = {'o', who, 'w', ARGV[5]}
if t and (not c[5] or c[4] == '0') then
  -- The task's context does not count it: its hash expired before the task and is made
  -- again here (small, unless its tasks are in `lc`), or was (by this or an older replica,
  -- so other tasks of it may be missing too). Counted, with the tasks the hash holds, so
  -- that the context is counted as one without tasks only when its last task expires.
  if c[4] or (not c[1] and redis.call('EXISTS', p .. 'lc:' .. ctx) == 0) then
    if c[4] == '0' then redis.call('ZREM', le, bare_member(ctx)) end
    local n = (c[1] and tasks_in(ck) or 0) + (c[5] and 0 or 1)
    set[5], set[6] = 'n', tostring(n)
    set[7], set[8] = 't:' .. task, (t[5] or '0') .. ' ' .. (t[4] or '')
  end
elseif not c[1] and not t then
  set[5], set[6] = 'n', '0'
end
redis.call('HSET', ck, unpack(set))
if not c[1] and not t then
  count_bare(p, who, now, tonumber(ARGV[8]), tonumber(ARGV[11]), ctx)
-- The owner's expiry index lives as long as any context its turns keep, so that what it
-- counts is not forgotten while those contexts live on. Before 2026-12-07 it could expire
-- while they lived: a context without tasks that finds it gone is counted again.
elseif redis.call('PEXPIRE', le, ARGV[8]) == 0 and not t and c[4] == '0'
    and tasks_in(ck) == 0 then
  count_bare(p, who, now, tonumber(ARGV[8]), tonumber(ARGV[11]), ctx)
end
if u == '' and ARGV[10] ~= '' then
  u = ARGV[10]
  redis.call('HSET', ck, 'u', u)
end
if ARGV[9] ~= '' then redis.call('HSETNX', ck, 'cl', ARGV[9]) end
redis.call('PEXPIRE', ck, ARGV[8])
return {'ok', u}
"#
);

/// Learns one answer. ARGV: prefix, principal, agent name, context or '', task or '', state
/// or '', timestamp or '', retention ms, lease token or '', workspace to bind a context the
/// turn adopts or '', lease ms, [`SMALL_CONTEXT`], the most entries the owner keeps
/// (`state.max_tasks_per_owner`: a new task, or a new context without one, past it first
/// takes out the owner's least recently written, [`EVICT_PER_LEARN`] at most: `evict`),
/// then for the turn's last answer the lease to release first ([`RELEASE`]) or '' twice:
/// its context, its token. Returns 'ok' or 'foreign' (nothing written then, the lease
/// released all the same).
const LEARN: &str = concat!(
    now_ms_lua!(),
    promote_lua!(),
    reap_lua!(),
    evict_lua!(),
    release_lua!(),
    r#"
local p, who, agent, ctx, task = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if ARGV[15] ~= '' then release(p, ARGV[14], ARGV[15]) end
local ret = ARGV[8]
local now = 0
if task ~= '' then
  -- Before anything is read: what this owner's expired tasks left in its indexes goes
  -- (a few of them; each new task adds one).
  now = now_ms()
  reap(p, who, now)
end
local ck = p .. 'c:' .. ctx
local c = redis.call('HMGET', ck, 'o', 'w', 'u', 'n', 't:' .. task)
if c[1] and c[1] ~= who then return 'foreign' end
local tk = p .. 't:' .. task
local t = {false, false, false, false}
if task ~= '' then
  t = redis.call('HMGET', tk, 'o', 'c', 's', 'ts')
  if t[1] and (t[1] ~= who or t[2] ~= ctx) then return 'foreign' end
end
-- An id the cap took out of another owner's is that owner's while its key would have
-- lived (one read for both ids, only for what is new).
local marks = {}
if not c[1] and ctx ~= '' then marks[#marks + 1] = p .. 'xc:' .. ctx end
if task ~= '' and not t[1] then marks[#marks + 1] = p .. 'xt:' .. task end
if #marks > 0 then
  for _, was in ipairs(redis.call('MGET', unpack(marks))) do
    if was and was ~= who then return 'foreign' end
  end
end
-- What the context lacks, in one write: its owner, its agent, the workspace it is bound to;
-- and while it is small (a new context is), its task count and the task.
local set = {}
if not c[1] then set[#set + 1] = 'o'; set[#set + 1] = who end
if not c[3] then set[#set + 1] = 'u'; set[#set + 1] = agent end
if not c[2] and ARGV[10] ~= '' then set[#set + 1] = 'w'; set[#set + 1] = ARGV[10] end
local small = (not c[1]) or c[4]
local n = tonumber(c[4] or '0') or 0
local bk = p .. 'b:' .. ctx
if ARGV[9] ~= '' then
  redis.call('SET', bk, ARGV[9] .. '\n', 'NX', 'PX', ARGV[11])
end
if task == '' and not c[1] then
  set[#set + 1] = 'n'; set[#set + 1] = '0'
  now = now_ms()
  count_bare(p, who, now, tonumber(ret), tonumber(ARGV[13]), ctx)
end
if task ~= '' then
  local state = ARGV[6] ~= '' and ARGV[6] or (t[3] or '')
  local ts = ARGV[7] ~= '' and ARGV[7] or (t[4] or '0')
  local owner = #who .. ':' .. who
  local lt = p .. 'lt:' .. owner
  -- The context's entry as one without tasks gives way to its task's (a large context
  -- keeps no count: one whose tasks a listing and `reap` took out has such an entry too).
  if c[4] == '0' or (not small and not t[1]) then
    redis.call('ZREM', p .. 'le:' .. owner, bare_member(ctx))
  end
  if not t[1] then
    -- Past the owner's cap, its least recently written go: an owner's share of Redis is
    -- bounded. (What went may include tasks of this context: its count is read again.)
    if evict(p, who, now, tonumber(ret), tonumber(ARGV[13]), task, ctx) then
      n = tonumber(redis.call('HGET', ck, 'n') or '0') or 0
    end
  elseif small and (not c[5] or c[4] == '0') then
    -- A known task its small context does not count (its hash expired before the task and
    -- was made again, by this or an older replica): counted, with the tasks the hash holds,
    -- so that the context never looks empty while a task of it lives.
    n = (c[1] and tasks_in(ck) or 0) + (c[5] and 0 or 1)
  end
  if small and not t[1] and n >= tonumber(ARGV[12]) then
    promote(p, ck, ctx, ret)
    small = false
  end
  if t[1] then
    redis.call('HSET', tk, 's', state, 'ts', ts)
    if t[3] ~= state then
      redis.call('ZREM', p .. 'ls:' .. owner .. ':' .. t[3], task)
      if not small then
        redis.call('ZREM', p .. 'lcs:' .. #ctx .. ':' .. ctx .. ':' .. t[3], task)
      end
    end
  else
    redis.call('HSET', tk, 'o', who, 'c', ctx, 'u', agent, 's', state, 'ts', ts)
    n = n + 1
  end
  redis.call('PEXPIRE', tk, ret)
  -- The task is due in the owner's expiry index when its key expires (a new member when its
  -- state changed: the member names the state's index).
  local le = p .. 'le:' .. owner
  if t[1] and t[3] ~= state then redis.call('ZREM', le, due_member(task, ctx, t[3])) end
  redis.call('ZADD', le, now + tonumber(ret), due_member(task, ctx, state))
  redis.call('PEXPIRE', le, ret)
  local idx = {lt, p .. 'ls:' .. owner .. ':' .. state}
  if small then
    set[#set + 1] = 'n'; set[#set + 1] = tostring(n)
    set[#set + 1] = 't:' .. task; set[#set + 1] = ts .. ' ' .. state
  else
    idx[3] = p .. 'lc:' .. ctx
    idx[4] = p .. 'lcs:' .. #ctx .. ':' .. ctx .. ':' .. state
  end
  for _, k in ipairs(idx) do
    redis.call('ZADD', k, ts, task)
    redis.call('PEXPIRE', k, ret)
  end
end
if #set > 0 then redis.call('HSET', ck, unpack(set)) end
redis.call('PEXPIRE', ck, ret)
if task == '' and c[1] then
  -- The owner's expiry index lives as long as the context this keeps (as a turn's does; a
  -- task or a new context renews it above).
  redis.call('PEXPIRE', p .. 'le:' .. #who .. ':' .. who, ret)
end
if task ~= '' and ARGV[9] ~= '' and redis.call('GET', bk) == ARGV[9] .. '\n' then
  redis.call('SET', bk, ARGV[9] .. '\n' .. task, 'KEEPTTL')
end
return 'ok'
"#
);

/// What Redis knows of some ids. ARGV: prefix, then `t<task>` or `c<context>` each. For a
/// task: o, c, u, s, ts, its key's PTTL and its context's o, u, w, cl, PTTL (11 values); for
/// a context its o, u, w, cl, PTTL (5 values). Absent values are nil.
const FETCH: &str = r#"
local p = ARGV[1]
local out = {}
local function put(vals) for i = 1, #vals do out[#out + 1] = vals[i] end end
local function context(ck)
  local c = redis.call('HMGET', ck, 'o', 'u', 'w', 'cl')
  c[5] = tostring(redis.call('PTTL', ck))
  put(c)
end
for i = 2, #ARGV do
  local kind, id = string.sub(ARGV[i], 1, 1), string.sub(ARGV[i], 2)
  if kind == 't' then
    local tk = p .. 't:' .. id
    local t = redis.call('HMGET', tk, 'o', 'c', 'u', 's', 'ts')
    t[6] = tostring(redis.call('PTTL', tk))
    put(t)
    if t[2] then context(p .. 'c:' .. t[2])
    else put({false, false, false, false, false}) end
  else
    context(p .. 'c:' .. id)
  end
end
return out
"#;

/// One ListTasks page. ARGV: prefix, principal, context or '', state or '', cursor timestamp
/// or '', cursor task id, page size, only tasks after this timestamp or '', retention ms,
/// [`LIST_PASS_BUDGET`]. Returns {total, where it stopped early (timestamp, task id) or '',
/// '', then per task: id, agent, ts, context, state, the caller's id of the context or '',
/// the task key's PTTL, '1' when Redis holds the context as the caller's too else '0'}, at
/// most page size + 1 tasks (one more than the page: there is a next page).
const LIST: &str = concat!(
    promote_lua!(),
    r#"
local p, who, ctx, state = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local size = tonumber(ARGV[7])
local owner = #who .. ':' .. who
local after = ARGV[8] ~= '' and tonumber(ARGV[8]) or nil
local cur_ts = ARGV[5] ~= '' and tonumber(ARGV[5]) or nil
-- Whether id a sorts before id b byte by byte, as a sorted set orders ties (Lua's own `<`
-- follows the collation of the locale redis-server runs in).
local function below(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
-- A small context: its tasks are fields of its hash (unless a replica of an older version
-- added some to `lc`: then they all go there first, and are listed from there).
if ctx ~= '' then
  local ck = p .. 'c:' .. ctx
  local h = redis.call('HGETALL', ck)
  local small, cl, owner_of, tasks = false, '', nil, {}
  for i = 1, #h, 2 do
    local f, v = h[i], h[i + 1]
    if f == 'n' then small = true
    elseif f == 'o' then owner_of = v
    elseif f == 'cl' then cl = v
    elseif string.sub(f, 1, 2) == 't:' then
      local ts, st = entry(v)
      local tsn = tonumber(ts) or 0
      if (state == '' or st == state) and (not after or tsn > after) then
        tasks[#tasks + 1] = {string.sub(f, 3), tsn, ts}
      end
    end
  end
  if small and redis.call('EXISTS', p .. 'lc:' .. ctx) == 1 then
    promote(p, ck, ctx, ARGV[9])
    small = false
  end
  -- Another caller's context (or none): nothing to list or count.
  if owner_of ~= who then return {0, '', ''} end
  if small then
    -- Newest first, ties by id descending (the sorted sets' order).
    table.sort(tasks, function(a, b)
      if a[2] ~= b[2] then return a[2] > b[2] end
      return below(b[1], a[1])
    end)
    local total = #tasks
    local rows, found, gone = {}, 0, 0
    for _, e in ipairs(tasks) do
      local id = e[1]
      if not cur_ts or e[2] < cur_ts or (e[2] == cur_ts and below(id, ARGV[6])) then
        local t = redis.call('HMGET', p .. 't:' .. id, 'o', 'u', 'c', 's')
        if not t[1] then
          redis.call('HDEL', ck, 't:' .. id)
          gone = gone + 1
          total = total - 1
        elseif t[1] == who and (state == '' or t[4] == state) then
          rows[#rows + 1] = id
          rows[#rows + 1] = t[2] or ''
          rows[#rows + 1] = e[3]
          rows[#rows + 1] = t[3]
          rows[#rows + 1] = t[4] or ''
          rows[#rows + 1] = cl
          rows[#rows + 1] = tostring(redis.call('PTTL', p .. 't:' .. id))
          rows[#rows + 1] = '1'
          found = found + 1
          if found > size then break end
        end
      end
    end
    if gone > 0 then redis.call('HINCRBY', ck, 'n', -gone) end
    table.insert(rows, 1, '')
    table.insert(rows, 1, '')
    table.insert(rows, 1, math.max(total, 0))
    return rows
  end
end
local key
if ctx ~= '' and state ~= '' then key = p .. 'lcs:' .. #ctx .. ':' .. ctx .. ':' .. state
elseif ctx ~= '' then key = p .. 'lc:' .. ctx
elseif state ~= '' then key = p .. 'ls:' .. owner .. ':' .. state
else key = p .. 'lt:' .. owner end
local min = ARGV[8] ~= '' and ('(' .. ARGV[8]) or '-inf'
local total = 0
if after then
  total = redis.call('ZCOUNT', key, min, '+inf')
else
  total = redis.call('ZCARD', key)
end
-- Where the page starts, as a rank (newest first): right after the cursor's task when it is
-- still there under the cursor's timestamp. A cursor whose task left or moved starts after
-- the ties it already gave: tasks tied on one timestamp (all those of an agent that sends
-- none) sort by id descending, so a binary search over the tied ranks finds the first id
-- below the cursor's (a few commands, however many tie).
local pos = 0
if cur_ts then
  local r = redis.call('ZREVRANK', key, ARGV[6])
  if r and tonumber(redis.call('ZSCORE', key, ARGV[6])) == cur_ts then
    pos = r + 1
  else
    local lo = redis.call('ZCOUNT', key, '(' .. ARGV[5], '+inf')
    local hi = redis.call('ZCOUNT', key, ARGV[5], '+inf')
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local m = redis.call('ZREVRANGE', key, mid, mid)
      if m[1] and below(m[1], ARGV[6]) then hi = mid else lo = mid + 1 end
    end
    pos = lo
  end
end
-- The page ends early, with where it stopped, once it has passed over this many entries
-- it does not list (expired tasks, and the like): one call's work stays bounded however
-- stale the index is.
local budget = tonumber(ARGV[10])
local rows = {}
local found, passed = 0, 0
local stop_ts, stop_id, last_ts, last_id = '', '', '', ''
local done = false
while not done do
  local chunk = redis.call('ZREVRANGE', key, pos, pos + 63, 'WITHSCORES')
  if #chunk == 0 then break end
  for i = 1, #chunk, 2 do
    local id, score = chunk[i], chunk[i + 1]
    local ts = tonumber(score)
    if after and ts <= after then done = true; break end
    if passed >= budget then
      done = true
      stop_ts, stop_id = last_ts, last_id
      break
    end
    pos = pos + 1
    last_ts, last_id = score, id
    local t = redis.call('HMGET', p .. 't:' .. id, 'o', 'u', 'c', 's')
    if not t[1] then
      redis.call('ZREM', key, id)
      pos = pos - 1
      total = total - 1
      passed = passed + 1
    elseif t[1] == who and (state == '' or t[4] == state) then
      local c = redis.call('HMGET', p .. 'c:' .. t[3], 'o', 'cl')
      local cl = c[2] or ''
      rows[#rows + 1] = id
      rows[#rows + 1] = t[2] or ''
      rows[#rows + 1] = score
      rows[#rows + 1] = t[3]
      rows[#rows + 1] = t[4] or ''
      rows[#rows + 1] = cl
      rows[#rows + 1] = tostring(redis.call('PTTL', p .. 't:' .. id))
      rows[#rows + 1] = c[1] == who and '1' or '0'
      found = found + 1
      if found > size then done = true; break end
    else
      passed = passed + 1
    end
  end
  -- A short chunk was the index's end.
  if #chunk < 128 then break end
end
table.insert(rows, 1, stop_id)
table.insert(rows, 1, stop_ts)
table.insert(rows, 1, math.max(total, 0))
return rows
"#
);

/// Keeps a lease alive. ARGV: prefix, context, token, lease ms. 1 when it was still ours.
const RENEW: &str = concat!(
    now_ms_lua!(),
    r#"
local bk = ARGV[1] .. 'b:' .. ARGV[2]
local v = redis.call('GET', bk)
if v and string.sub(v, 1, #ARGV[3] + 1) == ARGV[3] .. '\n' then
  redis.call('PEXPIRE', bk, ARGV[4])
  return 1
end
local fk = ARGV[1] .. 'bf:' .. ARGV[2]
local e = redis.call('HGET', fk, ARGV[3])
if e then
  local now = now_ms()
  if (tonumber(e) or 0) > now then
    redis.call('HSET', fk, ARGV[3], now + tonumber(ARGV[4]))
    redis.call('PEXPIRE', fk, ARGV[4])
    return 1
  end
  redis.call('HDEL', fk, ARGV[3])
end
return 0
"#
);

/// Ends a lease if it is still ours. ARGV: prefix, context, token. 1 when it was.
const RELEASE: &str = concat!(
    release_lua!(),
    "return release(ARGV[1], ARGV[2], ARGV[3])\n"
);

/// Takes a context's lease again for a turn whose agent goes on after the event that ended
/// it (its lease was released then: [`RELEASE`]), unless another turn holds the context now.
/// ARGV: prefix, context, a new token, the task the agent goes on with, lease ms, the
/// turn's old token. 1 when taken: the lease free, or still the old token's (its release
/// not run yet), or a follow-up's holder (`bf:`, as TURN makes one) when the running turn
/// is on the same task; 0 when the context is another task's.
const RETAKE: &str = concat!(
    now_ms_lua!(),
    followers_lua!(),
    r#"
local bk = ARGV[1] .. 'b:' .. ARGV[2]
local fk = ARGV[1] .. 'bf:' .. ARGV[2]
local task, old = ARGV[4], ARGV[6]
local now = now_ms()
local v = redis.call('GET', bk)
if v and not (old ~= '' and string.sub(v, 1, #old + 1) == old .. '\n') then
  local nl = string.find(v, '\n', 1, true)
  if task == '' or not nl or string.sub(v, nl + 1) ~= task then return 0 end
  redis.call('HSET', fk, 't', task, ARGV[3], now + tonumber(ARGV[5]))
  redis.call('PEXPIRE', fk, ARGV[5])
  return 1
end
if not v then
  local running = followers(fk, now)
  if running and running ~= task then return 0 end
end
redis.call('SET', bk, ARGV[3] .. '\n' .. task, 'PX', ARGV[5])
return 1
"#
);

/// What a TURN script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnVerdict {
    /// Admitted and leased; the agent the context (or task) is bound to, if any.
    Leased(Option<String>),
    /// A follow-up on the running turn's own task, a holder of the context of its own
    /// (under the same token, in `bf:`).
    FollowUp(Option<String>),
    NotFound,
    WorkspaceMismatch,
    ContextMismatch,
    Busy,
}

/// A task as Redis knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    pub owner: String,
    pub context: String,
    pub agent: String,
    pub state: String,
    pub ts: u64,
    /// How long Redis keeps it still (its key's TTL when read).
    pub valid: Duration,
}

/// A context as Redis knows it. `workspace`: `None` not bound yet, `Some(None)` the agent's
/// default directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextRecord {
    pub owner: String,
    pub agent: Option<String>,
    pub workspace: Option<Option<String>>,
    pub client: Option<String>,
    /// How long Redis keeps it still (its key's TTL when read).
    pub valid: Duration,
}

/// One listed task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRow {
    pub task: String,
    pub agent: String,
    pub ts: u64,
    pub context: String,
    pub state: String,
    pub client_context: Option<String>,
    /// How long Redis keeps the task still (its key's TTL when listed; its context's is at
    /// least that: every write of a task sets its context's expiry too).
    pub valid: Duration,
    /// Redis holds the task's context as the caller's (else only the task is learned).
    pub context_owned: bool,
}

/// One LIST call's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPage {
    pub total: usize,
    /// Up to the page size + 1 (one more: there is a next page).
    pub rows: Vec<ListRow>,
    /// Where the call ended early, having passed over [`LIST_PASS_BUDGET`] entries it does
    /// not list (the rows may be fewer than the page then, even none): the next page goes
    /// on after it.
    pub stopped: Option<(u64, String)>,
}

/// What one answer teaches, to be written.
#[derive(Debug, Clone, Default)]
pub struct News {
    pub context: Option<String>,
    pub task: Option<String>,
    pub state: Option<String>,
    pub ts: Option<u64>,
    /// A Message's `taskId` (checked in this replica's cache, not written to Redis).
    pub referenced: Option<String>,
    /// `context` is the known task's, not named by the answer (a Task or update without
    /// `contextId`): written to Redis, never adopted by a turn (nor leased, unless it is the
    /// turn's own context, whose lease then records the task).
    pub inferred_context: bool,
}

/// A workspace as stored (`w`).
pub fn encode_workspace(w: Option<&str>) -> String {
    match w {
        None => "-".to_string(),
        Some(p) => format!("={p}"),
    }
}

fn decode_workspace(w: Option<String>) -> Option<Option<String>> {
    let w = w?;
    match w.strip_prefix('=') {
        Some(p) => Some(Some(p.to_string())),
        None => Some(None),
    }
}

/// The scripts, over one store.
pub struct SharedOwners {
    pub store: Arc<RedisStore>,
    pub lease: Duration,
    pub retention: Duration,
    /// `state.max_tasks_per_owner`, as LEARN's and TURN's argument.
    max_tasks: String,
    turn: redis::Script,
    learn: redis::Script,
    fetch: redis::Script,
    list: redis::Script,
    renew: redis::Script,
    release: redis::Script,
    retake: redis::Script,
    /// Releases waiting to try again ([`SharedOwners::release_unanswered`]).
    retrying: tokio::sync::Semaphore,
}

/// How long Redis keeps a key, from its `PTTL` as the scripts return it: `-1` (no expiry,
/// written so by hand) counts as the retention; anything else unreadable as nothing.
fn ttl(pttl: &str, retention: Duration) -> Duration {
    match pttl.parse::<i64>() {
        Ok(-1) => retention,
        Ok(ms) => Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
        Err(_) => Duration::ZERO,
    }
}

/// When an unanswered script's lease is released again, in ms after the last try (15 s in
/// all): past that, a lease taken by a script Redis ran later still ends with
/// `busy_lease_ms`.
const RELEASE_RETRIES: [u64; 4] = [1000, 2000, 4000, 8000];

/// The most releases waiting to try again at once, per replica.
const MAX_RELEASES_RETRYING: usize = 1024;

fn ms(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

impl SharedOwners {
    pub fn new(
        store: Arc<RedisStore>,
        lease: Duration,
        retention: Duration,
        max_tasks: u64,
    ) -> SharedOwners {
        SharedOwners {
            store,
            lease,
            retention,
            max_tasks: max_tasks.to_string(),
            turn: redis::Script::new(TURN),
            learn: redis::Script::new(LEARN),
            fetch: redis::Script::new(FETCH),
            list: redis::Script::new(LIST),
            renew: redis::Script::new(RENEW),
            release: redis::Script::new(RELEASE),
            retake: redis::Script::new(RETAKE),
            retrying: tokio::sync::Semaphore::new(MAX_RELEASES_RETRYING),
        }
    }

    fn prefix(&self) -> &str {
        self.store.prefix()
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn turn(
        &self,
        context: &str,
        principal: &str,
        task: Option<&str>,
        workspace: Option<&str>,
        token: &str,
        client: Option<&str>,
        pick: Option<&str>,
    ) -> Result<TurnVerdict, StateUnavailable> {
        let ws = encode_workspace(workspace);
        let (lease, retention) = (ms(self.lease), ms(self.retention));
        let args = [
            self.prefix(),
            context,
            principal,
            task.unwrap_or(""),
            &ws,
            token,
            &lease,
            &retention,
            client.unwrap_or(""),
            pick.unwrap_or(""),
            &self.max_tasks,
        ];
        let (verdict, agent): (String, String) = self.store.run(&self.turn, &args).await?;
        let agent = Some(agent).filter(|a| !a.is_empty());
        Ok(match verdict.as_str() {
            "ok" => TurnVerdict::Leased(agent),
            "follow" => TurnVerdict::FollowUp(agent),
            "workspace" => TurnVerdict::WorkspaceMismatch,
            "mismatch" => TurnVerdict::ContextMismatch,
            "busy" => TurnVerdict::Busy,
            _ => TurnVerdict::NotFound,
        })
    }

    /// Writes what an answer teaches; `Ok(false)` when it names another caller's task or
    /// context (nothing written). `token`: the answering turn's lease (a context it adopts
    /// is leased to it); `bind`: the workspace such a context is bound to; `release`: the
    /// lease (context, token) the turn's last answer releases first, in the same script.
    pub async fn learn(
        &self,
        principal: &str,
        agent: &str,
        news: &News,
        token: Option<&str>,
        bind: Option<Option<&str>>,
        release: Option<(&str, &str)>,
    ) -> Result<bool, StateUnavailable> {
        let Some(context) = news.context.as_deref() else {
            if let Some((c, t)) = release {
                self.release(c, t).await?;
            }
            return Ok(true);
        };
        let ts = news.ts.map(|t| t.to_string()).unwrap_or_default();
        let token = token.unwrap_or("");
        let ws = bind.map(encode_workspace).unwrap_or_default();
        let (retention, lease_ms) = (ms(self.retention), ms(self.lease));
        let args = [
            self.prefix(),
            principal,
            agent,
            context,
            news.task.as_deref().unwrap_or(""),
            news.state.as_deref().unwrap_or(""),
            &ts,
            &retention,
            token,
            &ws,
            &lease_ms,
            SMALL_CONTEXT_ARG,
            &self.max_tasks,
            release.map_or("", |(c, _)| c),
            release.map_or("", |(_, t)| t),
        ];
        let verdict: String = self.store.run(&self.learn, &args).await?;
        Ok(verdict == "ok")
    }

    /// What Redis knows of these tasks and contexts (one round trip).
    pub async fn fetch(
        &self,
        tasks: &[String],
        contexts: &[String],
    ) -> Result<
        (
            Vec<(String, TaskRecord, Option<ContextRecord>)>,
            Vec<(String, ContextRecord)>,
        ),
        StateUnavailable,
    > {
        if tasks.is_empty() && contexts.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut args: Vec<String> = Vec::with_capacity(1 + tasks.len() + contexts.len());
        args.push(self.prefix().to_string());
        args.extend(tasks.iter().map(|t| format!("t{t}")));
        args.extend(contexts.iter().map(|c| format!("c{c}")));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let vals: Vec<Option<String>> = self.store.run(&self.fetch, &refs).await?;
        let mut it = vals.into_iter();
        let mut next = || it.next().flatten();
        let kept = |v: Option<String>| ttl(v.as_deref().unwrap_or(""), self.retention);
        let context = |o: Option<String>, u, w, cl, valid| {
            o.map(|owner| ContextRecord {
                owner,
                agent: u,
                workspace: decode_workspace(w),
                client: cl,
                valid,
            })
        };
        let mut found_tasks = Vec::new();
        for t in tasks {
            let (o, c, u, s, ts, valid) = (next(), next(), next(), next(), next(), kept(next()));
            let ctx = context(next(), next(), next(), next(), kept(next()));
            if let (Some(owner), Some(context), Some(agent)) = (o, c, u) {
                let record = TaskRecord {
                    owner,
                    context,
                    agent,
                    state: s.unwrap_or_default(),
                    ts: ts.and_then(|t| t.parse().ok()).unwrap_or(0),
                    valid,
                };
                found_tasks.push((t.clone(), record, ctx));
            }
        }
        let mut found_contexts = Vec::new();
        for c in contexts {
            if let Some(record) = context(next(), next(), next(), next(), kept(next())) {
                found_contexts.push((c.clone(), record));
            }
        }
        Ok((found_tasks, found_contexts))
    }

    /// One page of the caller's tasks after `cursor` (timestamp, task id), only those whose
    /// status timestamp is after `after` (0: all): the total, up to `size + 1` rows, and
    /// where Redis stopped early (fewer rows then, maybe none: the next page starts there).
    pub async fn list(
        &self,
        principal: &str,
        context: &str,
        state: &str,
        after: u64,
        cursor: Option<(u64, &str)>,
        size: usize,
    ) -> Result<ListedPage, StateUnavailable> {
        let (ts, id) = match cursor {
            Some((ts, id)) => (ts.to_string(), id),
            None => (String::new(), ""),
        };
        let size = size.to_string();
        let retention = ms(self.retention);
        let after = if after > 0 {
            after.to_string()
        } else {
            String::new()
        };
        let args = [
            self.prefix(),
            principal,
            context,
            state,
            &ts,
            id,
            &size,
            &after,
            &retention,
            LIST_PASS_BUDGET_ARG,
        ];
        let vals: Vec<redis::Value> = self.store.run(&self.list, &args).await?;
        let text = |v: &redis::Value| -> String {
            redis::from_redis_value::<String>(v).unwrap_or_default()
        };
        let mut it = vals.iter();
        let total = it
            .next()
            .and_then(|v| redis::from_redis_value::<i64>(v).ok())
            .unwrap_or(0)
            .max(0) as usize;
        let (stop_ts, stop_id) = (it.next().map(text), it.next().map(text));
        let stopped = match (stop_ts, stop_id) {
            (Some(ts), Some(id)) if !id.is_empty() => {
                ts.parse::<f64>().ok().map(|ts| (ts as u64, id))
            }
            _ => None,
        };
        let rest: Vec<&redis::Value> = it.collect();
        let retention = self.retention;
        let rows = rest
            .chunks_exact(8)
            .map(|r| ListRow {
                task: text(r[0]),
                agent: text(r[1]),
                ts: text(r[2]).parse::<f64>().map(|f| f as u64).unwrap_or(0),
                context: text(r[3]),
                state: text(r[4]),
                client_context: Some(text(r[5])).filter(|c| !c.is_empty()),
                valid: ttl(&text(r[6]), retention),
                context_owned: text(r[7]) == "1",
            })
            .collect();
        Ok(ListedPage {
            total,
            rows,
            stopped,
        })
    }

    /// Keeps the lease `token` on `context`; false when it is no longer ours.
    pub async fn renew(&self, context: &str, token: &str) -> Result<bool, StateUnavailable> {
        let lease = ms(self.lease);
        let args = [self.prefix(), context, token, &lease];
        let kept: i64 = self.store.run(&self.renew, &args).await?;
        Ok(kept == 1)
    }

    /// Releases the lease `token` holds on `context`, if it holds one: whether it did.
    pub async fn release(&self, context: &str, token: &str) -> Result<bool, StateUnavailable> {
        let args = [self.prefix(), context, token];
        let released: i64 = self.store.run(&self.release, &args).await?;
        Ok(released == 1)
    }

    /// Takes the lease on `context` again with a new `token`, for the turn whose agent goes
    /// on with `task` after the event that ended the turn released its `old` one
    /// ([`RETAKE`]): false when another turn holds the context now.
    pub async fn retake(
        &self,
        context: &str,
        token: &str,
        old: &str,
        task: &str,
    ) -> Result<bool, StateUnavailable> {
        let lease = ms(self.lease);
        let args = [self.prefix(), context, token, task, &lease, old];
        let taken: i64 = self.store.run(&self.retake, &args).await?;
        Ok(taken == 1)
    }

    /// Releases the lease a script that went unanswered may have taken with `token`: at once,
    /// then again while none was found, after each of [`RELEASE_RETRIES`]. Redis may still
    /// run that script after the first release: when its connection was replaced after
    /// misses in a row, the release went on the new one while the script waited on the old.
    /// At most [`MAX_RELEASES_RETRYING`] wait to try again at once (a Redis in trouble is not
    /// sent thousands of them); past that, such a lease ends with `busy_lease_ms`.
    pub async fn release_unanswered(&self, context: &str, token: &str) {
        if let Ok(true) = self.release(context, token).await {
            return;
        }
        let Ok(_retrying) = self.retrying.try_acquire() else {
            return;
        };
        for after in RELEASE_RETRIES {
            tokio::time::sleep(Duration::from_millis(after)).await;
            if let Ok(true) = self.release(context, token).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_bounds_are_the_published_ones() {
        assert_eq!(SMALL_CONTEXT_ARG.parse::<usize>(), Ok(SMALL_CONTEXT));
        assert_eq!(LIST_PASS_BUDGET_ARG.parse::<usize>(), Ok(LIST_PASS_BUDGET));
        assert!(LEARN.contains(&format!("'LIMIT', 0, {REAP_PER_LEARN})")));
        assert!(LEARN.contains(&format!("math.min(over, {EVICT_PER_LEARN})")));
    }
}
