"""`pulsar-lens plugins` (what loaded, what failed) and `pulsar-lens analyze SLUG` (run one)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pulsar_lens.cli.arguments import settings_of
from pulsar_lens.cli.bounded import MAX_ROWS, MAX_TEXT, Cut, bounded_frame, bounded_summary
from pulsar_lens.core.errors import PluginParamsError, PulsarLensError
from pulsar_lens.core.settings import Settings
from pulsar_lens.core.values import ENGINES

if TYPE_CHECKING:  # the plugins (pandas, the API) load when a command runs, not at parsing
    import pandas as pd

    from pulsar_lens.plugins.listing import Listing
    from pulsar_lens.plugins.registry import Registry

EMPTY_STORE = "no snapshots yet: run `pulsar-lens collect --once`"
MAX_SHOWN = 10  # choices quoted in an error


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plugins", help="list the analysis plugins that loaded and that failed")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="import the third-party plugins again instead of reading the listing cache, "
        "and refresh it",
    )
    p.set_defaults(func=run_plugins)

    a = sub.add_parser("analyze", help="run one analysis plugin on the stored snapshots")
    a.add_argument("slug", help="the plugin's name, e.g. bundle-ownership")
    a.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a plugin parameter (repeatable), e.g. --param window=5",
    )
    a.add_argument(
        "--store",
        default=None,
        help="snapshot store directory (default $PULSAR_LENS_STORE or ./var/store)",
    )
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    a.add_argument(
        "--max-rows",
        type=_count,
        default=MAX_ROWS,
        help=f"rows printed per frame, items per summary list (default {MAX_ROWS}; 0: all)",
    )
    a.add_argument(
        "--max-text",
        type=_count,
        default=MAX_TEXT,
        help=f"characters printed per text, e.g. a name (default {MAX_TEXT}; 0: all)",
    )
    a.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="the plugin's engine, to say which you expect (a Spark plugin runs a Spark job "
        "here, with its progress on stderr, and stores the result for the dashboard)",
    )
    a.add_argument(
        "--stored",
        action="store_true",
        help="a Spark plugin: print its newest stored result instead of running a job",
    )
    a.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,  # left out, it does not undo `pulsar-lens -v analyze`
        help="as `pulsar-lens -v`: log at DEBUG level, and print the traceback of the "
        "plugin's failure",
    )
    a.set_defaults(func=run_analyze)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 10**9:
        raise argparse.ArgumentTypeError(f"takes a whole number from 0 to 10^9, found {text!r}")
    return value


# ---- plugins ---------------------------------------------------------------------------


def registry_listing(listing: Listing) -> dict[str, Any]:
    loaded = [
        {
            "name": p.name,
            "title": p.title,
            "version": p.version,
            "engine": p.engine,
            "api_version": p.api_version,
            "requires": list(p.requires),
            "source": p.source,
        }
        for p in sorted(listing.plugins.values(), key=lambda p: p.name)
    ]
    failed = [
        {"plugin": f.plugin, "source": f.source, "error": f.message} for f in listing.failures
    ]
    return {"loaded": loaded, "failed": failed}


def _listing(settings: Settings, *, fresh: bool) -> Listing:
    """The listing of the plugins of `settings`: third-party code is imported in workers
    only, or not at all when the listing cache under the cache directory has their answers."""
    from pulsar_lens.lab.runtime import cache_root
    from pulsar_lens.plugins import isolation
    from pulsar_lens.plugins.listing import list_plugins

    return list_plugins(
        plugin_dirs=settings.plugin_dirs,
        limits=isolation.limits_of(settings),
        cache_dir=cache_root(),
        fresh=fresh,
    )


def _discover(settings: Settings) -> Registry:
    """The plugins of `settings`. The worker process that first imports third-party ones
    starts before this process imports the API and the built-ins, so the two run side by
    side."""
    from pulsar_lens.plugins import isolation

    isolation.warm_for(settings.plugin_dirs)
    from pulsar_lens.plugins.registry import discover

    return discover(plugin_dirs=settings.plugin_dirs, limits=isolation.limits_of(settings))


def run_plugins(args: argparse.Namespace) -> int:
    """Exit 0 when every plugin loaded, 1 when any failed (the listing is printed either way)."""
    listing = registry_listing(_listing(settings_of(args), fresh=args.fresh))
    failed = 1 if listing["failed"] else 0
    if args.json:
        print(json.dumps(listing, indent=2))
        return failed
    print(f"{len(listing['loaded'])} plugin(s) loaded")
    for p in listing["loaded"]:
        api = f"api {p['api_version']}"
        print(f"  {p['name']:<22} {p['version']:<8} {p['engine']:<6} {api:<6} {p['title']}")
        print(f"  {'':<22} from {p['source']}")
        if p["requires"]:
            print(f"  {'':<22} requires {', '.join(p['requires'])}")
    if listing["failed"]:
        print(f"{len(listing['failed'])} plugin(s) failed to load")
        for f in listing["failed"]:
            print(f"  {f['plugin'] or '?'} from {f['source']}: {f['error']}")
    return failed


# ---- analyze ---------------------------------------------------------------------------


def parse_params(pairs: Sequence[str], *, plugin: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PluginParamsError(plugin, f"--param takes KEY=VALUE, found {pair!r}")
        params[key.strip()] = value
    return params


def coerce_params(model: Any, raw: Mapping[str, str]) -> dict[str, Any]:
    """Command-line strings as param values: JSON text for list and object fields.

    Scalars stay strings; the Params model coerces them ("5" to 5, "true" to True).
    """
    out: dict[str, Any] = {}
    for key, text in raw.items():
        field = model.model_fields.get(key)
        value: Any = text
        if field is not None and field.annotation is not str and text[:1] in "[{":
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = text
        out[key] = value
    return out


def check_choices(loaded: Any, store: Any, raw: Mapping[str, str]) -> None:
    """A param the plugin offers choices for (the dashboard's select box, from the stored
    snapshots) must be one of them: an unknown subscription is refused, not drawn as nothing.

    The choices come with the plugin's default-params result; without one (a Spark plugin
    whose job has not run yet) nothing is checked."""
    from pulsar_lens.plugins import runner
    from pulsar_lens.plugins.results import StoredValues

    given = {key: value for key, value in raw.items() if value}
    if not given:
        return
    try:
        defaults = runner.validate_params(loaded.plugin, None)
        default_run = runner.run(loaded, store, defaults, use_cache=False, views=False)
    except PulsarLensError:
        return
    choices = default_run.choices
    if default_run.choices_error:
        print(
            f"pulsar-lens: warning: the params of {loaded.name} are not checked against the "
            f"stored snapshots: {default_run.choices_error}",
            file=sys.stderr,
        )
    for key, value in given.items():
        allowed = choices.get(key)
        if allowed is None or value in allowed:
            continue
        if isinstance(allowed, StoredValues) and allowed.lost:  # pruned since it was read
            print(
                f"pulsar-lens: warning: --param {key} of {loaded.name} is not checked: its "
                "stored choices went while they were read (a newer analysis replaced them)",
                file=sys.stderr,
            )
            continue
        known = ", ".join(repr(v) for v in allowed[:MAX_SHOWN]) or "none"
        if len(allowed) > MAX_SHOWN:
            known += f", ... ({len(allowed)} in all)"
        raise PluginParamsError(
            loaded.name, f"--param {key}={value!r} is not in the stored snapshots; known: {known}"
        )


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    text = frame.to_json(orient="records", date_format="iso", date_unit="ms", default_handler=str)
    records: list[dict[str, Any]] = json.loads(text or "[]")
    return records


def run_analyze(args: argparse.Namespace) -> int:
    settings = settings_of(args)  # before the store's imports: a refusal costs no pyarrow
    from pulsar_lens.core.store import (
        Store,  # keep `pulsar-lens plugins` free of the store's imports
    )
    from pulsar_lens.core.storeroot import check_root
    from pulsar_lens.plugins import runner
    from pulsar_lens.plugins.engines import BY_NAME, engine_of

    loaded = _discover(settings).get(args.slug)
    if args.engine and BY_NAME[args.engine] is not engine_of(loaded):
        print(
            f"pulsar-lens analyze: {loaded.name} runs on the {loaded.engine} engine, "
            f"not {args.engine}",
            file=sys.stderr,
        )
        return 2
    raw = parse_params(args.param, plugin=loaded.name)
    params = runner.validate_params(loaded.plugin, coerce_params(type(loaded.plugin).Params, raw))
    store_dir = check_root(args.store or settings.store_dir, writable=False)
    store = Store(store_dir)
    try:
        if store.latest_snapshot_id() is None:
            print(f"pulsar-lens: {EMPTY_STORE} (store: {store_dir})", file=sys.stderr)
            return 1
        check_choices(loaded, store, raw)
        if not engine_of(loaded).per_poll and not args.stored:
            from pulsar_lens.cli.spark_job import run_spark_job  # starts a JVM: only when asked for

            if not run_spark_job(loaded, store, params, spark=settings.spark):
                return 1
        output = runner.run(loaded, store, params, use_cache=False)
    except OSError as exc:  # e.g. a file where the store has a folder
        print(f"pulsar-lens: cannot read the store {store_dir}: {exc}", file=sys.stderr)
        return 1
    cut = Cut(args.max_rows, args.max_text)
    if args.json:
        print(json.dumps(_json_output(output, cut), indent=2, default=str))
    else:
        _print_text(output, cut)
    return 0


def _json_output(output: Any, cut: Cut) -> dict[str, Any]:
    frames = {
        name: frame_records(bounded_frame(name, f, cut)) for name, f in output.result.frames.items()
    }
    return {
        "plugin": output.plugin,
        "version": output.version,
        "params": output.params.model_dump(mode="json"),
        "snapshot_ids": list(output.snapshot_ids),
        "stored": output.stored,
        "summary": bounded_summary(output.result.summary, cut),
        "frames": frames,
        "cut": cut.as_json(),
    }


def _print_text(output: Any, cut: Cut) -> None:
    how = "stored result" if output.stored else "computed now"
    if output.computed_at:
        how += f", computed at {output.computed_at}"
    import pandas as pd

    print(f"{output.plugin} {output.version} on {len(output.snapshot_ids)} snapshot(s) ({how})")
    for key, value in bounded_summary(output.result.summary, cut).items():
        print(f"  {key}: {value}")
    with pd.option_context(
        "display.width", 200, "display.max_columns", None, "display.max_colwidth", 60
    ):
        for name, frame in output.result.frames.items():
            print(f"\n== {name} ({len(frame)} rows)")
            shown = bounded_frame(name, frame, cut)
            print(shown.to_string(index=False) if len(shown) else "  (empty)")
    if cut.said():
        print(f"\n{cut.said()}")
