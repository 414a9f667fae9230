"""The frame of the report page: its inline CSS and script (its look, and the links that save a figure or a
table), the navigation, the warnings at the top and the document around the sections."""

from __future__ import annotations

import datetime as _dt

from .html_blocks import _anchor, _e

_CSS = """
*{box-sizing:border-box}
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 margin:0;background:#f6f7f9;color:#1d2330;line-height:1.45;font-size:15px}
main{max-width:1240px;margin:0 auto;padding:24px 28px 60px;background:#fff;min-height:100vh;
 box-shadow:0 0 12px rgba(0,0,0,.06)}
h1{font-size:28px;margin:4px 0 4px}
h2{font-size:22px;margin:38px 0 10px;padding-bottom:6px;border-bottom:2px solid #e3e6eb}
h3{font-size:17px;margin:26px 0 8px}
p.meta{color:#5b6475;margin:0 0 12px;font-size:13px}
nav{background:#f1f4f8;border-radius:6px;padding:10px 14px;margin:14px 0;font-size:14px}
nav a{margin-right:14px;color:#1f5fa8;text-decoration:none}
nav div{margin:2px 0}
nav a.fitname{font-weight:600;margin-right:8px}
h4{font-size:14px;margin:14px 0 4px}
nav a:hover{text-decoration:underline}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e5e8ee;text-align:left;vertical-align:top}
th{background:#f1f4f8;font-weight:600;position:sticky;top:0}
tbody tr:nth-child(even){background:#fafbfc}
td.num,th.num{text-align:right;white-space:nowrap}
td.name{max-width:420px;overflow-wrap:anywhere}
.tablewrap{max-width:100%;overflow-x:auto}
.tablewrap.tall{max-height:640px;overflow-y:auto;border:1px solid #e5e8ee}
figure{margin:14px 0 22px}
figcaption{font-size:12.5px;color:#5b6475;margin-top:4px}
.note{font-size:13px;color:#5b6475}
.warning{background:#fdecea;border:3px solid #c62828;color:#7f1010;border-radius:8px;padding:14px 18px;
 margin:16px 0;font-size:16px}
.warning strong.big{display:block;font-size:21px;margin-bottom:4px;color:#b71c1c}
.caution{background:#fff6e0;border:2px solid #e0a000;color:#6b4e00;border-radius:8px;padding:10px 16px;margin:14px 0}
.ok{background:#e8f5e9;border:1px solid #66bb6a;color:#1b5e20;border-radius:8px;padding:8px 14px;margin:12px 0;
 display:inline-block}
.bad{color:#b71c1c;font-weight:600}
.good{color:#2e7d32}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:18px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
code{background:#f1f4f8;padding:1px 4px;border-radius:3px;font-size:12.5px}
details summary{cursor:pointer;color:#1f5fa8;margin:6px 0}
.fit{border-top:4px solid #1f5fa8;margin-top:44px}
figure .figwrap{max-width:100%;overflow:auto;cursor:zoom-in}
figure .figwrap svg{max-width:100%;height:auto;display:block;border:1px solid #eef0f3}
figure .figwrap.zoom{cursor:zoom-out}
figure .figwrap.zoom svg{max-width:none}
a.dl,span.dl a{color:#1f5fa8;text-decoration:none;font-size:12.5px}
a.dl:hover,span.dl a:hover{text-decoration:underline}
p.dl{margin:4px 0 14px;font-size:12.5px;color:#5b6475}
.tablewrap:not(.tall) + p.dl{margin-top:-8px}
.howto{background:#f4f8fd;border-left:3px solid #8fb3e0;padding:7px 12px;margin:8px 0 12px;font-size:13.5px;
 color:#2c3a4f;max-width:980px}
.howto b{color:#1f3f6e}
"""


#: Saving a figure: its inline SVG as a file, or drawn on a canvas at 200 dpi as PNG; a CSV link saved
#: through a Blob (a browser may refuse to open a data: URL over 2 MB); a click on a figure toggles its
#: full size.
_SCRIPT = """
function mtSvgText(svg){return new XMLSerializer().serializeToString(svg);}
function mtSave(url,name){var a=document.createElement('a');a.href=url;a.download=name;
 document.body.appendChild(a);a.click();a.remove();setTimeout(function(){URL.revokeObjectURL(url);},4000);}
function mtPngBlob(svg,scale,done){var vb=svg.viewBox.baseVal,w=Math.round(vb.width*scale),
 h=Math.round(vb.height*scale),img=new Image();
 img.onload=function(){var c=document.createElement('canvas');c.width=w;c.height=h;var g=c.getContext('2d');
  g.fillStyle='#fff';g.fillRect(0,0,w,h);g.drawImage(img,0,0,w,h);c.toBlob(done,'image/png');};
 img.src='data:image/svg+xml;charset=utf-8,'+encodeURIComponent(mtSvgText(svg));}
function mtCsvBlob(a){var h=a.getAttribute('href');
 return new Blob([decodeURIComponent(h.slice(h.indexOf(',')+1))],{type:'text/csv'});}
document.addEventListener('click',function(e){
 var c=e.target.closest('a.csv');
 if(c){e.preventDefault();mtSave(URL.createObjectURL(mtCsvBlob(c)),c.getAttribute('download'));return;}
 var a=e.target.closest('a[data-save]');
 if(a){e.preventDefault();var svg=a.closest('figure').querySelector('svg'),name=a.getAttribute('data-name');
  if(a.getAttribute('data-save')==='svg'){
   mtSave(URL.createObjectURL(new Blob([mtSvgText(svg)],{type:'image/svg+xml'})),name);}
  else{mtPngBlob(svg,200/72,function(b){mtSave(URL.createObjectURL(b),name);});}
  return;}
 var w=e.target.closest('.figwrap');if(w){w.classList.toggle('zoom');}
});
"""


def _navigation(fits: dict, comparison: bool, with_checks: dict) -> list[str]:
    """The links of the navigation: the data, the comparison, and every fit's sections."""
    nav = ['<a href="#data">Data</a>'] + (['<a href="#comparison">Comparison</a>'] if comparison else [])
    for name in fits:
        aid = _anchor(name)
        nav.append(f'<span class="navfit"><a class="fitname" href="#{_e(aid)}">{_e(name)}:</a>'
                   f'<a href="#{_e(aid)}-leaderboard">leaderboard</a>'
                   f'<a href="#{_e(aid)}-accuracy">IRT vs accuracy</a>'
                   f'<a href="#{_e(aid)}-scores">domain scores</a>'
                   f'<a href="#{_e(aid)}-domains">domains</a>'
                   f'<a href="#{_e(aid)}-items">item map</a>'
                   f'<a href="#{_e(aid)}-correlation">correlation</a>'
                   f'<a href="#{_e(aid)}-diagnostics">diagnostics</a>'
                   + (f'<a href="#{_e(aid)}-checks">model checks</a>' if with_checks[name] else "") + "</span>")
    return nav


def _top_warnings(warnings_top: list[tuple[str, str]]) -> str:
    """The warnings at the top of the page: a red box for a fit that did not converge, else a caution."""
    top_warn = ""
    for name, w in warnings_top:
        if "not converged" in w:
            top_warn += ('<div class="warning" role="alert"><strong class="big">⚠ Fit “' + _e(name)
                         + "” did NOT converge</strong>" + _e(w) + f'. <a href="#{_e(_anchor(name))}-diagnostics">'
                         "See its diagnostics.</a></div>")
        else:
            top_warn += f'<div class="caution">{_e(w)}</div>'
    return top_warn


def _document(title: str, fits: dict, interval: float, top_warn: str, nav: list[str], sections: list[str]) -> str:
    """The whole page: title, when and by which version it was made, the top warnings, the navigation and the
    sections, with the CSS and the script inline."""
    try:
        from importlib.metadata import version

        ver = version("mtlirt")
    except ImportError:  # pragma: no cover - PackageNotFoundError is an ImportError
        ver = "?"
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join([
        f"<h1>{_e(title)}</h1>",
        (f'<p class="meta">Generated {now} by mtlirt {_e(ver)} · fits: {_e(", ".join(fits))} · '
         f"intervals: {interval:.0%} equal-tailed</p>"),
        top_warn,
        "<nav>" + "".join(f"<div>{x}</div>" for x in nav) + "</nav>",
        *sections,
    ])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><main>\n{body}\n</main>"
            f"<script>{_SCRIPT}</script></body></html>\n")
