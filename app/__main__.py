from app.server.cli.main import main

main()
