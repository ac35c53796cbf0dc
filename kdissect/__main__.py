from .crash import main

main()
