"""``veracity web``: the page and the HTTP API in one ASGI app (:mod:`veracity.web.app`), batch jobs and
the check history persisted under ``$VERACITY_HOME/web`` (:mod:`veracity.web.jobs`)."""
