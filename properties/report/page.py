"""Writing a page: a jinja2 template of templates/ (autoescaped) and its figures as PNG files in a folder beside
it, ``<page stem>-img/``, linked by relative paths so that the page opens from the file system."""

import shutil
from pathlib import Path

from properties.tools.gate import write_whole

TEMPLATES = Path(__file__).with_name("templates")


def image_folder(html_path):
    """The folder of the figures of the page ``html_path``."""
    return Path(html_path).with_name(Path(html_path).stem + "-img")


def _environment():
    import jinja2  # optional: properties/report/libraries.py says when it is missing

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["us"] = lambda t: "n/a" if t is None else f"{t:.2f}"
    env.filters["ratio"] = lambda r: "n/a" if r is None else f"{r:.2f}x"
    env.filters["thousands"] = lambda n: "n/a" if n is None else f"{n:,}"
    env.filters["count"] = lambda n: f"{n / 1e6:.2f} M" if n >= 10**6 else f"{n:,}"
    return env


class Images:
    """The figures of one page: ``add`` saves a Figure into the page's image folder and returns its link."""

    def __init__(self, html_path):
        self.folder = image_folder(html_path)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)

    def add(self, name, figure):
        path = self.folder / f"{name}.png"
        figure.savefig(path)
        return f"{self.folder.name}/{path.name}"


def render(template, context):
    """The HTML text of ``template`` (a file name in templates/) filled with ``context``."""
    return _environment().get_template(template).render(**context)


def write(html_path, template, context):
    """Write the page whole (through a temporary file) and return its path."""
    html_path = Path(html_path)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(html_path, render(template, context))
    return html_path
