from tracediff.cli import main

main()
