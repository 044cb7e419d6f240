"""Human labels where they are made: ``recjudge annotate``'s local labelling page and its logs.

The package is named for the work (as :mod:`recjudge.judging` is), so that ``recjudge.annotate`` stays
the verb. One module per job:

- :mod:`.tasks`: each pair with what the judge's prompt shows of it (profile, candidate, scale);
- :mod:`.log`: the append-only, fsynced label log of each assessor, and its state read back;
- :mod:`.queue`: which task each assessor gets next (overlap, skips, self-assessment), progress;
- :mod:`.security`: loopback, the access token, CSRF tokens and the headers of every answer;
- :mod:`.server`: the aiohttp application (Jinja2 pages in ``templates/``, ``static/annotate.js``);
- :mod:`.export`: each assessor's qrels (atomically, one output set) and the labelling report;
- :mod:`.command`: the run: tasks, server, export on exit.
"""
