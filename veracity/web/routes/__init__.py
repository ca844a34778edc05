"""The web app's routers, one module per resource; each is ``router(ctx: WebContext) -> APIRouter``.

Adding a resource: a module here with that function, and its name in ``ROUTERS`` (the order routes are
matched in; the page comes last)."""

from __future__ import annotations

from veracity.web.routes import checks, index, jobs, meta, page, texts

ROUTERS = (checks.router, texts.router, jobs.router, index.router, meta.router, page.router)
