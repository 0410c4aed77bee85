from waybox.cli import run

run()
