"""The batch run: notebook execution, scheduler, run folder, interrupts, start page, report (the summary,
publish), the run's page and its headline chart, compare, fleet."""
