"""The batch run: notebook execution, scheduler, run folder, interrupts, start page, report, compare, fleet."""
