"""The project's maintained developer tools, for a checkout of the repository (they are not installed with the
package): acceptance runs on a GPU box (acceptance/), the simulations behind the gate's and the watch's settings
(simulate/), the workflow linters (ci/) and the site's headless screenshot (site_screenshot). Each tool runs from the
repository root as `python -m tools.<folder>.<tool> ...` (the screenshot: `python -m tools.site_screenshot`), its
docstring giving the usage; the modules they share (acceptance/inject, scenarios, history_checks, and parser, whose
ToolParser says a bad argument in one line) have no command line of their own. tests/tools/ tests them."""
