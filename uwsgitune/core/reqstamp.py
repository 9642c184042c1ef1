"""The proxy's X-Request-Start stamp: its format, the queue wait it gives, and the clock skew.

**Formats.** Proxies stamp the moment they forwarded the request, as time since the epoch:
nginx's `t=${msec}` (`t=1795732664.209`: seconds with milliseconds), or plain seconds (with
a fraction), milliseconds or microseconds, with or without the `t=` prefix. The unit is not
written down, so it is read from the magnitude (`UNITS`): today's time is about 1.8e9 s,
1.8e12 ms, 1.8e15 µs, and the bands between are far from any of them. `parse_stamp` answers
the stamp in µs and the `StampFormat` it was read as, whose `name` is what a person is told
("t=seconds (nginx ${msec})"). Text that is none of these answers None: a bad stamp.

**Queue wait** = the worker's start (`%(tmicros)`) − the stamp: the time between the proxy
sending the request and a worker taking it, which is the listen queue plus the network
hop. Service time is `%(micros)`, counted from that start. `classify_wait` sorts a raw wait:

- `NEGATIVE`: below zero, down to `-MAX_SKEW_US`. A request cannot start before the proxy
  sent it, so a wait below zero is the proxy's clock running ahead of the app's (or nginx's
  millisecond stamp, up to 1 ms). It counts as a wait of 0, and the raw value is kept apart
  to estimate the skew.
- `ABSURD`: beyond `-MAX_SKEW_US` or above `MAX_WAIT_US`: a client-sent or broken stamp
  (the proxy must overwrite the header; the docs say so). Counted, never recorded.
- `OK`: recorded as the queue wait.

**Skew.** A skew between two clocks shifts every raw wait by the same amount. When the proxy
runs ahead, the requests that waited about nothing (there are always some, below full load)
show up as negative waits of about the skew, so a low quantile of the raw waits well below
zero measures it: `skew_offset` answers the offset (µs) when at least `SKEW_MIN_SHARE` of
the raw waits are below `-SKEW_TOLERANCE_US`, with a sentence saying so. The offset is
stated, never applied: a correction would assume that some request waited nothing, which
uwsgitune cannot prove. A proxy behind the app's clock inflates every wait instead, and
cannot be told from a real wait; at low load, a floor well above zero in every request's
wait is the hint, which the window reports as its minimum.

**Without a stamp**, the mean queue wait is estimated from the kernel's listen queue by
Little's law: `little_wait(mean queue length, throughput)`, a mean and not a percentile.

**The public API:** `parse_stamp(bytes) -> (µs, StampFormat) | None`, `StampFormat.name`;
`classify_wait(raw µs) -> WaitKind`; `skew_offset(low quantile) -> (lead µs, sentence) |
None`; `little_wait(Lq, λ) -> s | None`; `NO_STAMP`, the sentence for a window without
stamps; the bounds `MAX_WAIT_US`, `MAX_SKEW_US`, `SKEW_TOLERANCE_US`, `SKEW_MIN_SHARE`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

MAX_WAIT_US = 300 * 10**6  # above any proxy's read timeout: such a wait is not real
MAX_SKEW_US = 60 * 10**6  # a clock a minute off is broken, not skewed
SKEW_TOLERANCE_US = 2_000  # nginx's ${msec} is cut to the millisecond; NTP keeps ~1 ms
SKEW_MIN_SHARE = 0.01  # the low quantile read for the skew
NO_STAMP = (
    "no X-Request-Start stamp: queue wait is estimated from the listen queue "
    "(Little's law, a mean); set the header in the proxy "
    '(nginx: uwsgi_param HTTP_X_REQUEST_START "t=${msec}";) to split it per request'
)


class StampUnit(enum.Enum):
    SECONDS = "seconds"
    MILLISECONDS = "milliseconds"
    MICROSECONDS = "microseconds"


# A stamp whose whole part is below a bound (in its own unit, any prefix) is read in that
# unit, with that many digits of its fraction being whole µs.
UNITS: tuple[tuple[int, StampUnit, int], ...] = (
    (10**11, StampUnit.SECONDS, 6),
    (10**14, StampUnit.MILLISECONDS, 3),
    (10**17, StampUnit.MICROSECONDS, 0),
)
_OLDEST_US = 10**15  # 2001: an earlier stamp is not a time of day


@dataclass(frozen=True, eq=False)
class StampFormat:
    """One of the formats a stamp is read as; one instance each (`FORMATS`), so that counting
    them costs an identity hash."""

    prefixed: bool  # `t=` in front
    unit: StampUnit
    name: str  # what a person is told


def _format(prefixed: bool, unit: StampUnit) -> StampFormat:
    name = f"t={unit.value}" if prefixed else unit.value
    if prefixed and unit is StampUnit.SECONDS:
        name = "t=seconds (nginx ${msec})"
    return StampFormat(prefixed, unit, name)


FORMATS = {(p, u): _format(p, u) for p in (True, False) for u in StampUnit}
NGINX = FORMATS[True, StampUnit.SECONDS]


class WaitKind(enum.Enum):
    OK = "ok"
    NEGATIVE = "negative"
    ABSURD = "absurd"


def parse_stamp(raw: bytes) -> tuple[int, StampFormat] | None:
    """The stamp in µs since the epoch, and the format it was read as; None if it is not one.

    `raw` is the header's bytes as logged (ASCII digits, an optional `t=`, one `.`).
    """
    # nginx's t=${msec}, the common case, is read without the general path below.
    if raw[:2] == b"t=" and len(raw) == 16 and raw[12] == 46:  # 46: "."
        text = raw[2:12] + raw[13:]
        if text.isdigit():
            micros = int(text) * 1000
            return (micros, NGINX) if micros >= _OLDEST_US else None
    prefixed = raw[:2] == b"t="
    whole, dot, frac = (raw[2:] if prefixed else raw).partition(b".")
    if not whole.isdigit() or len(whole) > 18 or (dot and not frac.isdigit()):
        return None
    number = int(whole)
    for bound, unit, digits in UNITS:
        if number < bound:
            micros = number * 10**digits
            if frac and digits:
                micros += int(frac[:digits].ljust(digits, b"0"))
            return (micros, FORMATS[prefixed, unit]) if micros >= _OLDEST_US else None
    return None


def classify_wait(raw_us: int) -> WaitKind:
    if raw_us < 0:
        return WaitKind.NEGATIVE if raw_us >= -MAX_SKEW_US else WaitKind.ABSURD
    return WaitKind.OK if raw_us <= MAX_WAIT_US else WaitKind.ABSURD


def skew_offset(negative_low_quantile_us: float | None) -> tuple[float, str] | None:
    """The proxy's clock lead (µs) and the sentence that states it, or None when none shows.

    The argument is the `SKEW_MIN_SHARE` quantile of the raw waits when it is below zero
    (the latency window computes it), else None.
    """
    if negative_low_quantile_us is None or negative_low_quantile_us > -SKEW_TOLERANCE_US:
        return None
    lead = -negative_low_quantile_us
    return lead, (
        f"the proxy's clock runs about {lead / 1000:.0f} ms ahead of the app's: queue waits "
        f"read up to {lead / 1000:.0f} ms short (negative ones count as 0); sync the clocks "
        "(NTP) on both hosts"
    )


def little_wait(queue_length: float | None, throughput: float | None) -> float | None:
    """The mean time a request waits in the listen queue (s): Lq / λ, by Little's law.

    `queue_length` is the mean number of requests in the listen queue over a period, and
    `throughput` the requests per second served in it. None when either is unknown or no
    request was served (there is no wait to speak of).
    """
    if queue_length is None or throughput is None or throughput <= 0 or queue_length < 0:
        return None
    return queue_length / throughput
