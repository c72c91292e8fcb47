#include <cstdio>

int main() { std::puts("0.5 0.25"); }
