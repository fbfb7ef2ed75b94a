/* Reading {qid: {docid: number}} dicts into flat float64 buffers, the step that dominates turning a
 * TREC run and qrels into matrices (udcg.metrics.evaluate). The same walk as the pure-Python path
 * there (np.fromiter over chained dict views / dict.get), minus the interpreter's per-item
 * overhead. Optional: evaluate.py falls back to the Python path when this module is not built.
 *
 *   values(rows, out)            out[...] = every value of rows[0], then rows[1], ... (dict order)
 *   numbers(rows, out)           the same, each value an int or a float (their subclasses), no bool
 *   lookup(maps, rows, d, out)   out[...] = maps[i].get(key, d) for every key of rows[i], in order
 *   str_keys(rows)               whether every key of every dict of the iterable rows is a str
 *                                (a subclass included), as str.join would take them
 *
 * rows and maps are lists of dicts; out is a writable C-contiguous float64 buffer whose length is
 * the total number of items. A value that is not a real number raises TypeError; a length mismatch
 * raises ValueError. Nothing is kept between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int
get_out(PyObject *out, Py_buffer *view)
{
    if (PyObject_GetBuffer(out, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != sizeof(double) || view->format == NULL || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "out must be a writable contiguous float64 buffer");
        return -1;
    }
    return 0;
}

static int
put_slow(double *x, Py_ssize_t n, Py_ssize_t cap, PyObject *value, int strict)
{
    if (n >= cap) {
        PyErr_SetString(PyExc_ValueError, "more items than the output buffer holds");
        return -1;
    }
    if (strict && (PyBool_Check(value) || !(PyFloat_Check(value) || PyLong_Check(value)))) {
        PyErr_Format(PyExc_TypeError, "not an int or float: %R", value);
        return -1;
    }
    if (PyUnicode_Check(value) || PyBytes_Check(value)) {
        PyErr_Format(PyExc_TypeError, "not a number: %R", value);
        return -1;
    }
    *x = PyFloat_AsDouble(value); /* int, bool, numpy scalars, anything with __float__ */
    return (*x == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* Write one number. value is borrowed; it is held for the duration, since a __float__ or a key's
 * __eq__ running Python code could change the dict it was read from. */
static int
put(double *dst, Py_ssize_t *n, Py_ssize_t cap, PyObject *value, int strict)
{
    double x;
    if (PyFloat_CheckExact(value) && *n < cap) {
        dst[(*n)++] = PyFloat_AS_DOUBLE(value);
        return 0;
    }
    Py_INCREF(value);
    int status = put_slow(&x, *n, cap, value, strict);
    Py_DECREF(value);
    if (status < 0)
        return -1;
    dst[(*n)++] = x;
    return 0;
}

/* Release the buffer; on success check that every slot was written. */
static PyObject *
finish(Py_buffer *view, Py_ssize_t n, Py_ssize_t cap, int failed)
{
    PyBuffer_Release(view);
    if (failed)
        return NULL;
    if (n != cap) {
        PyErr_SetString(PyExc_ValueError, "fewer items than the output buffer holds");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
walk_rows(PyObject *args, int strict)
{
    PyObject *rows, *out, *key, *value;
    Py_buffer view;
    Py_ssize_t i, pos, n = 0, cap;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &rows, &out) || get_out(out, &view) < 0)
        return NULL;
    cap = view.len / (Py_ssize_t)sizeof(double);
    for (i = 0; i < PyList_GET_SIZE(rows); i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyDict_Check(row)) {
            PyErr_Format(PyExc_TypeError, "item %zd is not a dict", i);
            return finish(&view, n, cap, 1);
        }
        pos = 0;
        while (PyDict_Next(row, &pos, &key, &value))
            if (put((double *)view.buf, &n, cap, value, strict) < 0)
                return finish(&view, n, cap, 1);
    }
    return finish(&view, n, cap, 0);
}

static PyObject *
walk_values(PyObject *self, PyObject *args)
{
    return walk_rows(args, 0);
}

static PyObject *
walk_numbers(PyObject *self, PyObject *args)
{
    return walk_rows(args, 1);
}

static PyObject *
walk_lookup(PyObject *self, PyObject *args)
{
    PyObject *maps, *rows, *out, *dflt, *key, *value;
    Py_buffer view;
    Py_ssize_t i, pos, n = 0, cap;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyList_Type, &maps, &PyList_Type, &rows, &dflt, &out)
        || get_out(out, &view) < 0)
        return NULL;
    cap = view.len / (Py_ssize_t)sizeof(double);
    if (PyList_GET_SIZE(maps) != PyList_GET_SIZE(rows)) {
        PyErr_SetString(PyExc_ValueError, "maps and rows differ in length");
        return finish(&view, n, cap, 1);
    }
    for (i = 0; i < PyList_GET_SIZE(rows); i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *map = PyList_GET_ITEM(maps, i);
        if (!PyDict_Check(row) || !PyDict_Check(map)) {
            PyErr_Format(PyExc_TypeError, "item %zd is not a dict", i);
            return finish(&view, n, cap, 1);
        }
        pos = 0;
        while (PyDict_Next(row, &pos, &key, &value)) {
            PyObject *found = PyDict_GetItemWithError(map, key); /* borrowed */
            if (found == NULL && PyErr_Occurred())
                return finish(&view, n, cap, 1);
            if (put((double *)view.buf, &n, cap, found ? found : dflt, 0) < 0)
                return finish(&view, n, cap, 1);
        }
    }
    return finish(&view, n, cap, 0);
}

/* Keys are only read (no Python code runs), so the dicts cannot change under the walk. */
static PyObject *
walk_str_keys(PyObject *self, PyObject *rows)
{
    PyObject *iter = PyObject_GetIter(rows), *row, *key, *value;
    Py_ssize_t pos;
    int all = 1;
    if (iter == NULL)
        return NULL;
    while (all && (row = PyIter_Next(iter)) != NULL) {
        if (!PyDict_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "an item is not a dict");
            Py_DECREF(row);
            Py_DECREF(iter);
            return NULL;
        }
        pos = 0;
        while (PyDict_Next(row, &pos, &key, &value))
            if (!PyUnicode_Check(key)) {
                all = 0;
                break;
            }
        Py_DECREF(row);
    }
    Py_DECREF(iter);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(all);
}

static PyMethodDef methods[] = {
    {"values", walk_values, METH_VARARGS, "values(rows, out): every value of every dict, in order, into out"},
    {"numbers", walk_numbers, METH_VARARGS, "numbers(rows, out): as values, each value an int or a float, not a bool"},
    {"str_keys", walk_str_keys, METH_O, "str_keys(rows): whether every key of every dict of rows is a str"},
    {"lookup", walk_lookup, METH_VARARGS, "lookup(maps, rows, default, out): maps[i].get(k, default) for each key k of rows[i]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_walk", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__walk(void)
{
    return PyModule_Create(&module);
}
