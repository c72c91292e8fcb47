// Not a training program: nothing to migrate.
int main() { return 0; }
