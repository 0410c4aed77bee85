"""gunicorn hooks (`--config python:waybox.web.gunicorn_conf`): each worker process is a
Process row (type "server") under the gunicorn row that `waybox server` launched."""


def post_worker_init(worker) -> None:
    from waybox.models.process import Process

    Process.current(Process.Type.SERVER)


def worker_exit(server, worker) -> None:
    from waybox.models.process import register_exit

    try:
        register_exit(0)
    except Exception as err:  # the database may be gone at shutdown; gunicorn must still exit
        server.log.warning("could not record the worker's exit: %s", err)
