-- wrk for bench/latency_accuracy.py: as bench/latency_wrk.lua (each request stamped
-- X-Request-Start: t=<µs since the epoch> when wrk writes it), and each thread appends
-- "<stamp µs> <µs when the answer was read>" per answer to $H38_GAP_DIR/gap-<thread>.txt:
-- the app echoes the stamp in its answer, so each answer is matched to its request, and each
-- logged request to the moment wrk read its answer (wrk's own latency of it, before wrk's
-- coordinated-omission correction adds samples).
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_usec; } h38_timeval;
int gettimeofday(h38_timeval *tv, void *tz);
]]
local tv = ffi.new("h38_timeval")
local function now_us()
  ffi.C.gettimeofday(tv, nil)
  return tonumber(tv.tv_sec) * 1000000 + tonumber(tv.tv_usec)
end

local counter = 0
setup = function(thread)
  counter = counter + 1
  thread:set("id", counter)
end

local out = nil

request = function()
  return wrk.format(nil, nil, {["X-Request-Start"] = string.format("t=%d", now_us())})
end

response = function(status, headers, body)
  local t = now_us()
  if out == nil then
    out = io.open(string.format("%s/gap-%d.txt", os.getenv("H38_GAP_DIR"), id), "w")
  end
  local stamp = headers["X-Request-Start"] or "t=0"
  out:write(string.format("%s %d\n", string.sub(stamp, 3), t))
  out:flush()
end

done = function(summary, latency, requests)
  io.write(string.format(
    '{"h38wrk": 1, "duration_us": %d, "requests": %d, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
      .. '"latency_us": {"mean": %.3f, "max": %d, "p50": %d, "p95": %d, "p99": %d}}\n',
    summary.duration, summary.requests, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency.mean, latency.max, latency:percentile(50), latency:percentile(95),
    latency:percentile(99)))
end
