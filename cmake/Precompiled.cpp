// Empty: the target this file belongs to exists to build cmake/Precompiled.h
// into a precompiled header that other targets reuse
// (cmake/PrecompiledHeaders.cmake).
