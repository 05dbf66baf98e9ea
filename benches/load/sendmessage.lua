-- wrk script: POST the same ~1 KB A2A 1.0 SendMessage JSON-RPC request
-- (sendmessage.json: fixed messageId, no contextId) on every request, count
-- non-2xx responses and JSON-RPC error bodies, and print one
-- machine-readable summary line (BENCHJSON {...}) from done().
--
-- Env: BENCH_TOKEN  bearer token (sent to every target; only a2a-edge checks it)
--      BENCH_BODY   request body file (default: sendmessage.json beside this script)
--      BENCH_CONTEXTS a file of context ids, one per line (the `conversation` shape):
--                   each request names the next of them (`message.contextId`), in turn,
--                   so that every request is a follow-up in a context that exists

-- The body is read from sendmessage.json next to this script (override with
-- BENCH_BODY=/path/to/body.json), so run.sh's smoke requests send the same bytes.
local function script_dir()
  local src = debug.getinfo(1, "S").source
  return (src:sub(1, 1) == "@" and src:sub(2):match("(.*/)")) or "./"
end
local body_path = os.getenv("BENCH_BODY") or (script_dir() .. "sendmessage.json")
local fh = assert(io.open(body_path, "rb"), "cannot open " .. body_path)
local body = fh:read("*a")
fh:close()
body = body:gsub("%s+$", "")

wrk.method = "POST"
wrk.path = "/"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
local token = os.getenv("BENCH_TOKEN")
if token and token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end
wrk.body = body

-- The conversation shape: one body per context, taken in turn (round-robin over more contexts
-- than connections, so that no two requests in flight name one context). `request` is defined
-- here (wrk sends a fixed request when the script defines none when loaded); the bodies are
-- built at its first call, once wrk.init has set the Host header that wrk.format writes.
local contexts_path = os.getenv("BENCH_CONTEXTS")
-- The body that names context `ctx`.
local function body_in(ctx)
  local b, n = body:gsub('"message":{', '"message":{"contextId":"' .. ctx .. '",', 1)
  assert(n == 1, "the body has no message object")
  return b
end
if contexts_path and contexts_path ~= "" then
  local bodies, next_body = nil, 0
  local function build()
    local out = {}
    for ctx in io.lines(contexts_path) do
      if ctx ~= "" then
        out[#out + 1] = wrk.format(nil, nil, nil, body_in(ctx))
      end
    end
    assert(#out > 0, "no context ids in " .. contexts_path)
    return out
  end
  request = function()
    bodies = bodies or build()
    next_body = next_body % #bodies + 1
    return bodies[next_body]
  end
end

-- per-thread counters (each wrk thread has its own Lua state)
non2xx = 0
rpcerr = 0

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  elseif body and string.find(body, '"error"', 1, true) then
    rpcerr = rpcerr + 1
  end
end

-- The bytes of one request's body: the fixed body, or the conversation shape's mean (each
-- names its context).
local function body_bytes()
  if not (contexts_path and contexts_path ~= "") then
    return #wrk.body
  end
  local sum, n = 0, 0
  for ctx in io.lines(contexts_path) do
    if ctx ~= "" then
      sum, n = sum + #body_in(ctx), n + 1
    end
  end
  return n > 0 and math.floor(sum / n + 0.5) or #wrk.body
end

function done(summary, latency, requests)
  local n2, re = 0, 0
  for _, t in ipairs(threads) do
    n2 = n2 + (t:get("non2xx") or 0)
    re = re + (t:get("rpcerr") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"bytes":%d,'
      .. '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,'
      .. '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d,'
      .. '"non2xx":%d,"rpc_errors":%d,"body_bytes":%d}\n',
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout,
    n2, re, body_bytes()))
end
