"""What a run's HTML pages share: one copy of plotly.js (``plotly.packed.js``: gzipped, base64, 2 MB
instead of 4.8, unpacked by the browser) and one notebook stylesheet in the run folder; plotly
figures as a div plus a ``Plotly.newPlot`` call; the same packed plotly.js inlined in the one page
meant to travel alone. Executed notebooks keep figures as plotly JSON only."""

from __future__ import annotations

import base64
import gzip
import json
import re
from functools import lru_cache
from pathlib import Path

from ..core.results import write_atomic

PLOTLY_MIME = "application/vnd.plotly.v1+json"
PLOTLY_JS = "plotly.packed.js"
NOTEBOOK_CSS = "notebook.css"

# nbconvert's lab template, with the shared plotly.js and stylesheet linked instead of inlined.
NOTEBOOK_TEMPLATE = f"""{{%- extends 'lab/index.html.j2' -%}}
{{%- block html_head_js -%}}
<script src="{PLOTLY_JS}"></script>
{{{{ super() }}}}
{{%- endblock html_head_js -%}}
{{% block notebook_css %}}<link rel="stylesheet" href="{NOTEBOOK_CSS}">{{% endblock notebook_css %}}
"""


def plotly_js_path() -> Path:
    """The plotly.js bundled with the installed plotly package."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@lru_cache(maxsize=1)
def packed_plotly_js() -> str:
    """JavaScript that defines ``window.plotlyReady``: a promise that unpacks the installed plotly.js
    (gzip, base64; ``DecompressionStream``), runs it and resolves once ``Plotly`` exists. It runs
    plotly.js with ``define`` hidden, so that plotly sets the global ``Plotly`` even where require.js
    is loaded (nbconvert's pages load it from a CDN) instead of registering as an AMD module."""
    import plotly

    packed = base64.b64encode(gzip.compress(plotly_js_path().read_bytes(), mtime=0)).decode("ascii")
    return (
        f"/* plotly.js from plotly {plotly.__version__} (Python package), gzip + base64 */\n"
        "window.plotlyReady = (async function () {\n"
        f'  var bytes = Uint8Array.from(atob("{packed}"), function (c) {{ return c.charCodeAt(0); }});\n'
        '  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));\n'
        '  var script = document.createElement("script");\n'
        "  script.textContent = await new Response(stream).text();\n"
        "  var define = window.define;\n"
        "  window.define = undefined;\n"
        "  document.head.appendChild(script);\n"
        "  window.define = define;\n"
        "})();\n"
    )


def ensure_plotly_js(folder: Path) -> Path:
    """``folder/plotly.packed.js`` (``packed_plotly_js``), written unless it is there already."""
    target = Path(folder) / PLOTLY_JS
    if not target.is_file():
        write_atomic(target, packed_plotly_js())
    return target


# After the lab's stylesheets: a long code line or text output wraps instead of widening the page.
WRAP_CSS = ".jp-Notebook pre{white-space:pre-wrap;overflow-wrap:anywhere}"


def ensure_notebook_css(folder: Path, environment) -> Path:
    """``folder/notebook.css``: the lab template's stylesheets (read through nbconvert's jinja
    ``environment``, as the template would inline them) and ``WRAP_CSS``, written once per run folder."""
    target = Path(folder) / NOTEBOOK_CSS
    if not target.is_file():
        source = lambda name: environment.loader.get_source(environment, name)[0]  # noqa: E731
        own = re.search(
            r'\{% endif %\}\s*<style type="text/css">(.*?)</style>\s*\{% endblock notebook_css %\}',
            source("lab/index.html.j2"),
            re.S,
        )
        css = "\n".join(
            [source("static/index.css"), source("static/theme-light.css"), own.group(1) if own else "", WRAP_CSS]
        )
        write_atomic(target, css)
    return target


# Shown where a chart should be until its script has drawn it. JupyterLab's HTML viewer runs no script
# in a page until it is trusted, and the server sends every file it serves sandboxed (a null origin),
# so it refuses plotly.packed.js to those pages; report.html carries its own plotly.js.
CHART_HINT = (
    "Chart not drawn: this page's scripts did not run, or could not load plotly.packed.js. In JupyterLab, "
    "open report.html (it carries its own plotly.js) and click Trust HTML, or open it in a new browser tab; "
    "a browser opening this file from disk draws it as it is."
)


def figure_html(figure: dict, div_id: str) -> str:
    """A div and the script that draws ``figure`` (plotly JSON: data, layout, config) into it once
    plotly.js is ready (``window.plotlyReady``; a plain plotly.js loaded before works too), and
    ``CHART_HINT`` before it, which that script removes once the chart is drawn."""
    spec = json.dumps(
        {
            "data": figure.get("data", []),
            "layout": figure.get("layout", {}),
            "config": {"responsive": True, **figure.get("config", {})},
        }
    ).replace("</", "<\\/")
    return (
        f'<p id="{div_id}-hint" class="chart-hint">{CHART_HINT}</p>\n'
        f'<div id="{div_id}" class="plotly-graph-div"></div>\n<script>(window.plotlyReady || Promise.resolve())'
        f'.then(function () {{ var f = {spec}; return Plotly.newPlot("{div_id}", f.data, f.layout, f.config); }})'
        f'.then(function () {{ document.getElementById("{div_id}-hint").remove(); }});</script>'
    )


def plotly_outputs_to_html(nb) -> int:
    """Replace each plotly JSON output of notebook ``nb`` (in place) by its ``figure_html``, for
    nbconvert; returns how many were replaced."""
    count = 0
    for i, cell in enumerate(nb.cells):
        for j, output in enumerate(cell.get("outputs", [])):
            if PLOTLY_MIME in output.get("data", {}):
                output["data"] = {"text/html": figure_html(output["data"][PLOTLY_MIME], f"plotly-{i}-{j}")}
                count += 1
    return count


def inline_plotly_js() -> str:
    """``packed_plotly_js`` inside one ``<script>``, for a page that carries its own plotly.js."""
    return f"<script>{packed_plotly_js()}</script>"
