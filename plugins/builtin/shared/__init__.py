"""Code two or more built-in analyses share: the one door between them.

A built-in analysis imports `pulsar_lens.api` (what every plugin author has),
`pulsar_lens.core` (the domain), its own package, and this package; never another
built-in's package. It reads another analysis's output only as a third-party plugin does:
by naming it in `requires` and reading `data.result("<slug>")`.

What may live here: a definition two analyses must agree on (`outages`: what an outage is,
for `unload-latency` and `unload-history`; `failover`: how a failover group is named and
scored; `sticky`: the sticky-range planner; `versions`: which broker line's models a snapshot
gets), and the vocabulary of one analysis's result that another reads through `requires`
(`ownership`: `bundle-ownership`'s columns, `by` values and charts, drawn again by
`unload-latency`). Nothing here is a plugin, reads the store or imports a built-in.
What a third-party author would want as well belongs in
`pulsar_lens.api` instead. `tests/plugins/test_builtin_imports.py` holds the rule.
"""
