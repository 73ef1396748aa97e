"""``keel batch``: many keel sessions at once, on this machine or a Ray cluster, with nothing lost.

A batch is a TASKS.jsonl file, one task per line (:mod:`.tasks`). Each task runs as an ordinary
``keel -p`` session in its repository (:mod:`.worker`), so its transcript is where ``keel
sessions`` finds it and a crash of one task touches no other. Results are appended to OUT.jsonl
as each task finishes, one fsynced line each (:mod:`.results`); ``--resume`` skips what is there.

Backends (:mod:`.runner`): ``local`` runs the sessions as child processes under a concurrency
limit; ``ray`` (:mod:`.ray_backend`, the ``ray`` extra) runs each as a Ray task with retries on
worker death. Both feed the same result writer. Provider limits are shared by every worker: a
loopback proxy in the batch process (:mod:`.limiter`) admits requests under requests/min and
tokens/min limits and turns a 429 into one global pause instead of a retry storm.
"""
