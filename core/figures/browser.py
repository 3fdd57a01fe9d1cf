"""The figure as plotly.js should receive it, drawn once per change, not twice (`for_browser`); and its toolbar's
export button (`chart_config`).

Streamlit's chart element mounts a new figure with `Plotly.react` and then calls `Plotly.react` again
with a JSON copy of the same figure (its theme step). plotly.js diffs the two: with no
`layout.datarevision` it compares data arrays by identity, and it always compares `layout.template`,
typed arrays (numpy's `{dtype, bdata}`) and trace `meta` by identity. A JSON copy differs in all of
them, so every chart was computed and drawn a second time: ~170 ms of the ~500 ms the browser spent
on a positional-page interaction (5 charts; bench/README.md, "What the misses are made of").

`for_browser` gives plotly.js a figure whose copy compares equal:
- the template applied to the layout and traces (plotly.js's rules: layout values win, every x axis
  takes `template.layout.xaxis`, `annotationdefaults` goes under each annotation, trace templates
  cycle per trace type), and no `layout.template`;
- arrays as plain lists, and `layout.datarevision` a hash of the data: plotly.js then recomputes
  only when the data changed;
- a trace's `meta` object wrapped in a one-item list (`_listed`).
Shown with `theme=None`, so Streamlit adds no template back: its look is ours
(`core.figures.common.app_template`: plotly_white under Streamlit's light chart theme).
"""

from __future__ import annotations

import hashlib
import pickle
import re
import weakref
from typing import Any

import plotly.graph_objects as go

IMAGE_FORMATS = ("png", "svg")


def chart_config(filename: str, image_format: str = "png") -> dict[str, Any]:
    """Plotly config: the toolbar camera downloads this chart as PNG or SVG under a useful name."""
    if image_format not in IMAGE_FORMATS:
        image_format = "png"
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": image_format, "filename": filename, "scale": 2},
    }


# Layout entries that plotly.js applies to every numbered sibling (xaxis2, scene3, coloraxis2, ...).
_NUMBERED = ("xaxis", "yaxis", "scene", "polar", "ternary", "geo", "map", "mapbox", "smith", "coloraxis")
# Trace types drawn on x/y axes: their figure gets an `xaxis`/`yaxis` from the template even when the
# layout names none (plotly.js creates the first axes for them).
_CARTESIAN = {"scatter", "scattergl", "bar", "histogram", "histogram2d", "histogram2dcontour", "heatmap",
              "contour", "box", "violin", "image", "funnel", "waterfall", "ohlc", "candlestick"}


# plotly.js turns some axis parts on when their colour, width or length is *given* (a showline default of
# "a line colour was set"); a template's value does not count as given. Baked into the layout it would,
# so these switches get their untouched defaults unless the figure itself sets the part or the switch.
# (switch, parts that imply it, untouched default), in the axis and in its `minor` dict; the major grid is
# left alone (on by default either way).
_IMPLIED = (("showline", ("linecolor", "linewidth"), False),
            ("ticks", ("ticklen", "tickwidth", "tickcolor"), ""),
            ("showgrid", ("gridcolor", "gridwidth", "griddash"), False))


def _keep_switches(axis: dict[str, Any], template_axis: dict[str, Any], figure_axis: dict[str, Any]) -> None:
    for level in (None, "minor"):
        out = axis if level is None else axis.get(level)
        given = figure_axis if level is None else figure_axis.get(level) or {}
        template = template_axis if level is None else template_axis.get(level) or {}
        if not isinstance(out, dict):
            continue
        if level is not None:  # the template's own `minor` where the figure gave none: written into a copy
            out = axis[level] = dict(out)
        for switch, parts, default in _IMPLIED:
            if (level is None and switch == "showgrid") or switch in given or switch in template \
                    or any(part in given for part in parts):
                continue
            if any(part in template for part in parts):
                out[switch] = default


def under(default: Any, value: Any) -> Any:
    """`value` over `default`: dicts merge key by key, anything else (lists included) replaces."""
    if isinstance(default, dict) and isinstance(value, dict):
        out = dict(default)
        for key, item in value.items():
            out[key] = under(default[key], item) if key in default else item
        return out
    return value


def plain(value: Any) -> Any:
    """Arrays as plain lists, recursively: numpy arrays, and `{dtype, bdata, shape}` typed-array specs (what
    a figure built from plotly JSON holds). plotly.js diffs lists by datarevision, typed arrays by identity."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            import base64

            import numpy as np

            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            if "shape" in value:  # "3, 4"
                array = array.reshape([int(n) for n in str(value["shape"]).split(",")])
            return array.tolist()
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def _listed(key: str, value: Any) -> Any:
    """A trace's `meta` object as a one-item list: plotly.js compares an object meta by identity (a
    redraw after every JSON copy) and a list meta by datarevision. Hover templates would read
    `%{meta[0].name}`; none does: meta tags traces for tests and analysis."""
    return [value] if key == "meta" and isinstance(value, dict) else value


def apply_template(spec: dict[str, Any]) -> dict[str, Any]:
    """A figure dict with its `layout.template` applied and removed (plotly.js's template rules)."""
    layout = dict(spec.get("layout") or {})
    template = layout.pop("template", None) or {}
    template_layout = template.get("layout") or {}
    template_data = template.get("data") or {}
    data, used = [], {}
    for trace in spec.get("data") or []:
        kind = trace.get("type", "scatter")
        items = template_data.get(kind) or []
        if items:
            index = used.get(kind, 0)
            used[kind] = index + 1
            defaults = {key: item for key, item in items[index % len(items)].items() if key != "type"}
            trace = under(defaults, trace)
        data.append(trace)
    cartesian = any(trace.get("type", "scatter") in _CARTESIAN for trace in data)
    for key, default in template_layout.items():
        if key in _NUMBERED:
            names = [name for name in layout if re.fullmatch(key + r"\d*", name)]
            if key in ("xaxis", "yaxis") and cartesian and key not in names:
                names.append(key)
            for name in names:
                given = layout.get(name, {})
                layout[name] = under(default, given)
                if key in ("xaxis", "yaxis"):
                    _keep_switches(layout[name], default, given)
        elif key.endswith("defaults"):  # annotationdefaults -> every annotation, ...
            items = key[: -len("defaults")] + "s"
            if isinstance(layout.get(items), list):
                layout[items] = [under(default, item) for item in layout[items]]
        else:
            layout[key] = under(default, layout[key]) if key in layout else default
    return {**spec, "data": data, "layout": layout}


def _held(obj) -> dict[str, Any]:
    """The properties plotly holds for a layout or a trace, to be read only: what its public `to_plotly_json()` returns
    a deep copy of. The one private plotly attribute read here (tests/test_layers.py SANCTIONED)."""
    return obj._props or {}


def browser_spec(fig: go.Figure) -> dict[str, Any]:
    """The figure dict `for_browser` wraps: template applied, lists, meta listed, datarevision.

    The layout and each trace are read as plotly holds them (`_held`: what `to_plotly_json()` returns a deep copy
    of), not through `fig.to_dict()`, which also base64-encodes numpy arrays that would only be decoded again.
    `plain` makes new dicts and lists all the way down, so the spec shares nothing with the figure but the
    template's values that `under` places (read, never written): a deep copy first copied everything twice, ~15%
    of a new attention map's build (bench/README.md, issue 45, session 15). tests/test_rerun_elements.py checks
    the spec against the copying reading."""
    props = _held(fig.layout)
    template = props.get("template")
    layout = {key: plain(item) for key, item in props.items() if key != "template"}
    data = [{key: _listed(key, plain(item)) for key, item in _held(trace).items()} for trace in fig.data]
    spec = apply_template({"data": data, "layout": {**layout, "template": template}})
    digest = hashlib.blake2b(pickle.dumps(spec["data"], protocol=5), digest_size=8)
    spec["layout"]["datarevision"] = digest.hexdigest()
    return spec


class BrowserFigure(go.Figure):
    """What `for_browser` returns: the figure dict made for the browser, built once, behind a plotly Figure.

    st.plotly_chart asks a Figure for `to_dict()` on every run that draws it (then encodes it as JSON); a
    plain dict it would validate again, number by number (seconds for a 512-token model view). So this
    Figure holds no traces of its own: plotly would validate every number of the spec too. `to_dict()`
    gives the one dict made by `for_browser` (a deep copy per call was a third of the work for a figure
    shared by every session, ui/shared_caches.py). Read a figure's traces from the figure you gave to
    `for_browser`, or from `to_dict()` here. Its own layout is empty, with an empty template: an empty Figure
    gets a copy of plotly's default template, ~0.5 ms (1.5 ms on a busy server) for every new figure, that
    `to_dict()` never reads; nothing in it is checked, as there is nothing in it."""

    _sent: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return go.Figure.to_dict(self) if self._sent is None else self._sent


def for_browser(fig: go.Figure) -> go.Figure:
    """`fig` as plotly.js redraws it once per change (module docstring); draw it with `theme=None`.
    Figures are read-only once built (pages share cached ones), so the result is kept while `fig` lives,
    and a result given back again is returned as it is (pages cache results across sessions)."""
    key = id(fig)
    kept = _KEPT.get(key)
    if kept is not None and kept[0]() is fig:
        return fig if kept[1] is None else kept[1]
    out = BrowserFigure({"layout": {"template": {}}}, _validate=False)  # an empty shell: what it sends is _sent
    out._sent = browser_spec(fig)
    out._sent["layout"]["template"] = None  # applied already: an explicit null, so none is added on the way
    for figure, result in ((fig, out), (out, None)):  # None: already for the browser
        _KEPT[id(figure)] = (weakref.ref(figure), result)
        weakref.finalize(figure, _KEPT.pop, id(figure), None)
    return out


_KEPT: dict[int, tuple[weakref.ref, go.Figure | None]] = {}
