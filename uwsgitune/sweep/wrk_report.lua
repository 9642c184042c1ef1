-- wrk's figures for uwsgitune, as one line of JSON (uwsgitune/sweep/wrk.py reads it): the
-- run's duration, requests and bytes, its errors by kind, and the latency distribution.
-- Durations and latencies are in microseconds, as wrk records them, not rounded as its
-- report prints them. `latency_us` is null when no latency was recorded (no request completed
-- in time: wrk records none for a request that timed out).
done = function(summary, latency, requests)
  local e = summary.errors
  local lat = "null"
  if #latency > 0 then
    lat = string.format(
      '{"mean": %.3f, "max": %d, "p50": %d, "p75": %d, "p90": %d, "p99": %d}',
      latency.mean, latency.max, latency:percentile(50), latency:percentile(75),
      latency:percentile(90), latency:percentile(99))
  end
  io.write(string.format(
    '{"uwsgitune_wrk": 1, "duration_us": %d, "requests": %d, "bytes": %d, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
      .. '"latency_us": %s}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout, lat))
end
