"""The /metrics exporter: poll-health series, cluster series from the newest snapshot, and the
families every plugin contributes through its `metrics()` hook (`collector`), built by pure
functions (`families`). It reads the store and the plugins; nothing below imports it."""
