from memprof.cli import main

main()
