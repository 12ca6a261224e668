-- wrk script of the MCP benchmark (load.mjs --loadgen wrk runs it; not a test).
-- One request shape per run, from the environment: BENCH_METHOD (POST: a JSON-RPC body
-- with the Streamable HTTP client headers; GET: the REST facade), BENCH_BODY, BENCH_TOKEN.
-- A response counts as good only if it is HTTP 200, its body contains BENCH_EXPECT and
-- does not contain BENCH_REFUSE (when set). `done` prints one line:
--   WRK_RESULT <requests> <good> <duration_us> <bytes> <p50_us> <p99_us> <socket_errors>
local method = os.getenv("BENCH_METHOD") or "POST"
local expect = os.getenv("BENCH_EXPECT") or ""
local refuse = os.getenv("BENCH_REFUSE") or ""

wrk.method = method
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or "")
if method == "POST" then
  wrk.body = os.getenv("BENCH_BODY") or ""
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = os.getenv("BENCH_PROTOCOL_VERSION") or "2025-11-25"
else
  wrk.headers["Accept"] = "application/json"
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

good = 0
function response(status, headers, body)
  if status == 200 and string.find(body, expect, 1, true)
    and (refuse == "" or not string.find(body, refuse, 1, true)) then
    good = good + 1
  end
end

function done(summary, latency, requests)
  local ok = 0
  for _, t in ipairs(threads) do
    ok = ok + t:get("good")
  end
  local e = summary.errors
  io.write(string.format("WRK_RESULT %d %d %d %d %d %d %d\n", summary.requests, ok, summary.duration,
    summary.bytes, latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write + e.timeout))
end
