"""The first stage of the flow: tables read, checked and simulated into `Responses`.

``tables`` (long tables in and out), ``validate`` (the input rules), ``responses``
(``Responses``; its batched reader in ``batch_reader``), ``importers`` (harness and
leaderboard exports to the long table), ``simulate`` (leaderboards with known truth;
its steps in ``sim_*``, the result in ``simulation``), ``outputs`` (what a writer may
replace, and the atomic write every writer uses); ``mmlu_subjects.csv`` the built-in table.
"""
