-- wrk for the latency benchmarks (bench/latency_rig.py): every request carries
-- X-Request-Start: t=<µs since the epoch>, read when wrk writes the request (wrk calls
-- request() for each request it writes, just before it starts that request's latency
-- clock), and done() prints one line of JSON with wrk's latency percentiles in µs.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_usec; } h38_timeval;
int gettimeofday(h38_timeval *tv, void *tz);
]]
local tv = ffi.new("h38_timeval")

request = function()
  ffi.C.gettimeofday(tv, nil)
  local us = tonumber(tv.tv_sec) * 1000000 + tonumber(tv.tv_usec)
  return wrk.format(nil, nil, {["X-Request-Start"] = string.format("t=%d", us)})
end

done = function(summary, latency, requests)
  local e = summary.errors
  local lat = "null"
  if #latency > 0 then
    lat = string.format(
      '{"mean": %.3f, "max": %d, "p50": %d, "p95": %d, "p99": %d}',
      latency.mean, latency.max, latency:percentile(50), latency:percentile(95),
      latency:percentile(99))
  end
  io.write(string.format(
    '{"h38wrk": 1, "duration_us": %d, "requests": %d, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
      .. '"latency_us": %s}\n',
    summary.duration, summary.requests,
    e.connect, e.read, e.write, e.status, e.timeout, lat))
end
