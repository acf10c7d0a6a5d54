from kprof.entry import main

main()
