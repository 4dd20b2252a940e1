from tracedoc.cli import main

main()
