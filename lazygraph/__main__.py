from lazygraph.cli import main

main()
