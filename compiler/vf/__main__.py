from vf.cli import main

main()
