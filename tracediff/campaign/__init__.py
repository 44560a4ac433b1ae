"""Seed campaigns: millions of scenarios on an executor, results streamed into a store.

:func:`~tracediff.campaign.run.run_campaign` runs a seed range through the implementations
on any executor (the local pool or a Dask cluster), writes each result into the campaign's
SQLite store (:mod:`tracediff.campaign.store`) as it arrives, explains each finding in the
worker that found it, and adds up statuses, signatures and per-worker throughput as it goes.
A campaign stopped (Ctrl-C, SIGTERM, ``--max-failures``, a lost machine) resumes where it
stopped: seeds already in the store are not run again.
"""
