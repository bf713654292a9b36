"""What studies use to see inside a step, on the core harness: the final trace analysed (``trace_analysis``,
``trace_row``), the first call's phases (``first_call_phases``), the profiler's timeline
(``profiler_timeline``), a Thunder step taken apart in place (``thunder_breakdown``, its timestamps
``call_stamps``), and the probes that run them beside the rounds (``probes``). Instruments import ``core``
only; studies import them."""
