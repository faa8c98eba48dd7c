"""The broker's Key_Shared hash ranges as a model, for many subscriptions at once.

`ranges` reads the ranges the broker reports and infers the selector behind them; `layout`
lays every subscription's members and ranges out back to back; `points` hashes replica points;
`fit` finds the consistent-hashing settings that reproduce the broker's ranges; `rebuild`
recomputes a subscription's ranges from its members and applies what-ifs.
"""
