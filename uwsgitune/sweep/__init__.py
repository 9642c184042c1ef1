"""`uwsgitune sweep`: the best worker count by experiment on a staging instance.

`plan` (ranges, steps, estimate, preflight) and `analysis` (recommendation, curve shape) and
`chart` (SVG) and `report` (table, JSON) are pure; `fifo`, `live` and `runner` do the I/O.
"""
