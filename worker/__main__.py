from vigil.worker.cli import main

main()
