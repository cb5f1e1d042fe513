"""The questions, reference queries and wrong queries of the sql environment, by database family.

Each task: ``family`` (the database), ``difficulty`` (1: one table, filters and simple aggregates; 2: joins,
GROUP BY, HAVING; 3: subqueries, anti-joins, top-per-group and multi-table joins), ``ordered`` (true when the
question asks for an order; the check then compares rows in order), ``main_table`` (the table the question is
mostly about), ``question``, ``query`` (the reference) and ``wrong_query`` (a plausible mistake that returns
a different result). :mod:`sql_env.make_data` runs them all against the generated databases before writing
``data/tasks.jsonl``. No braces in any text: the gold templates of environment.yaml are format strings.
"""

from __future__ import annotations

from typing import Any

TASKS: list[dict[str, Any]] = []


def task(
    family: str, difficulty: int, main_table: str, question: str, query: str, wrong_query: str, ordered: bool = False
) -> None:
    TASKS.append(
        {
            "family": family,
            "difficulty": difficulty,
            "ordered": ordered,
            "main_table": main_table,
            "question": question,
            "query": " ".join(query.split()),
            "wrong_query": " ".join(wrong_query.split()),
        }
    )


# -- shop: customers, products, orders, order_items ----------------------------------------------------------

task(
    "shop",
    1,
    "products",
    "List the name and price of every product in the Kitchen category that costs more than 50, "
    "from the most expensive to the cheapest.",
    "SELECT name, price FROM products WHERE category = 'Kitchen' AND price > 50 ORDER BY price DESC",
    "SELECT name, price FROM products WHERE category = 'Kitchen' AND price > 50 ORDER BY price",
    ordered=True,
)
task(
    "shop",
    1,
    "customers",
    "How many customers live in Estria?",
    "SELECT COUNT(*) FROM customers WHERE country = 'Estria'",
    "SELECT COUNT(DISTINCT city) FROM customers WHERE country = 'Estria'",
)
task(
    "shop",
    1,
    "products",
    "Which products are out of stock (zero units in the warehouse)? Give their names.",
    "SELECT name FROM products WHERE stock = 0",
    "SELECT name, stock FROM products WHERE stock = 0",
)
task(
    "shop",
    1,
    "orders",
    "List the IDs of all cancelled orders placed in 2025, in ascending order.",
    "SELECT order_id FROM orders WHERE status = 'cancelled' AND order_date >= '2025-01-01' ORDER BY order_id",
    "SELECT order_id FROM orders WHERE status = 'cancelled' ORDER BY order_id",
    ordered=True,
)
task(
    "shop",
    1,
    "products",
    "What is the average price of the products in the Electronics category, rounded to 2 decimal places?",
    "SELECT ROUND(AVG(price), 2) FROM products WHERE category = 'Electronics'",
    "SELECT ROUND(AVG(price), 2) FROM products",
)
task(
    "shop",
    2,
    "products",
    "For each product category, give the category, the number of products in it and their average price "
    "rounded to 2 decimal places.",
    "SELECT category, COUNT(*), ROUND(AVG(price), 2) FROM products GROUP BY category",
    "SELECT category, COUNT(*), ROUND(AVG(price), 2) FROM products WHERE stock > 0 GROUP BY category",
)
task(
    "shop",
    2,
    "orders",
    "List the names of the customers who have at least one pending order, each name once.",
    "SELECT DISTINCT c.name FROM customers c JOIN orders o ON o.customer_id = c.customer_id WHERE o.status = 'pending'",
    "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.customer_id WHERE o.status = 'pending'",
)
task(
    "shop",
    2,
    "customers",
    "For every customer who lives in Norland, give their name and the number of orders they have placed "
    "(0 for customers without orders).",
    "SELECT c.name, COUNT(o.order_id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.customer_id "
    "WHERE c.country = 'Norland' GROUP BY c.customer_id, c.name",
    "SELECT c.name, COUNT(*) FROM customers c LEFT JOIN orders o ON o.customer_id = c.customer_id "
    "WHERE c.country = 'Norland' GROUP BY c.customer_id, c.name",
)
task(
    "shop",
    2,
    "order_items",
    "What is the total revenue of the delivered orders, that is the sum of quantity times unit price over "
    "their order items, rounded to 2 decimal places?",
    "SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) FROM order_items oi JOIN orders o ON o.order_id = oi.order_id "
    "WHERE o.status = 'delivered'",
    "SELECT ROUND(SUM(oi.unit_price), 2) FROM order_items oi JOIN orders o ON o.order_id = oi.order_id "
    "WHERE o.status = 'delivered'",
)
task(
    "shop",
    2,
    "order_items",
    "Which product categories sold more than 160 units in total, counting every order except cancelled ones? "
    "Give the category and the number of units sold.",
    "SELECT p.category, SUM(oi.quantity) FROM order_items oi JOIN orders o ON o.order_id = oi.order_id "
    "JOIN products p ON p.product_id = oi.product_id WHERE o.status <> 'cancelled' "
    "GROUP BY p.category HAVING SUM(oi.quantity) > 160",
    "SELECT p.category, SUM(oi.quantity) FROM order_items oi JOIN products p ON p.product_id = oi.product_id "
    "GROUP BY p.category HAVING SUM(oi.quantity) > 160",
)
task(
    "shop",
    2,
    "order_items",
    "For the customers who have ordered at least 15 different products, give the name and the number of "
    "different products they ordered, sorted by that number from highest to lowest, then by name.",
    "SELECT c.name, COUNT(DISTINCT oi.product_id) AS n FROM customers c JOIN orders o ON o.customer_id = c.customer_id "
    "JOIN order_items oi ON oi.order_id = o.order_id GROUP BY c.customer_id, c.name "
    "HAVING COUNT(DISTINCT oi.product_id) >= 15 ORDER BY n DESC, c.name",
    "SELECT c.name, COUNT(oi.product_id) AS n FROM customers c JOIN orders o ON o.customer_id = c.customer_id "
    "JOIN order_items oi ON oi.order_id = o.order_id GROUP BY c.customer_id, c.name "
    "HAVING COUNT(oi.product_id) >= 15 ORDER BY n DESC, c.name",
    ordered=True,
)
task(
    "shop",
    3,
    "customers",
    "Which customers have never placed an order? Give their names.",
    "SELECT c.name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)",
    "SELECT c.name FROM customers c LEFT JOIN orders o ON o.customer_id = c.customer_id AND o.status = 'delivered' "
    "WHERE o.order_id IS NULL",
)
task(
    "shop",
    3,
    "order_items",
    "For each product category, which product brought in the most revenue (quantity times unit price, over all "
    "orders except cancelled ones)? Give the category, the product name and that revenue rounded to 2 decimal places.",
    "WITH revenue AS (SELECT p.category, p.name, SUM(oi.quantity * oi.unit_price) AS total FROM order_items oi "
    "JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id "
    "WHERE o.status <> 'cancelled' GROUP BY p.product_id) "
    "SELECT category, name, ROUND(total, 2) FROM revenue r "
    "WHERE total = (SELECT MAX(total) FROM revenue r2 WHERE r2.category = r.category)",
    "WITH revenue AS (SELECT p.category, p.name, SUM(oi.quantity * oi.unit_price) AS total FROM order_items oi "
    "JOIN products p ON p.product_id = oi.product_id GROUP BY p.product_id) "
    "SELECT category, name, ROUND(total, 2) FROM revenue r "
    "WHERE total = (SELECT MAX(total) FROM revenue r2 WHERE r2.category = r.category)",
)
task(
    "shop",
    3,
    "products",
    "List the name, category and price of every product that costs more than the average price of its own "
    "category, sorted by category and then by price from highest to lowest.",
    "SELECT name, category, price FROM products p "
    "WHERE price > (SELECT AVG(q.price) FROM products q WHERE q.category = p.category) ORDER BY category, price DESC",
    "SELECT name, category, price FROM products WHERE price > (SELECT AVG(price) FROM products) "
    "ORDER BY category, price DESC",
    ordered=True,
)
task(
    "shop",
    3,
    "orders",
    "Who are the top 3 customers by total amount spent on delivered orders (quantity times unit price)? Give "
    "the name and the amount rounded to 2 decimal places, highest first.",
    "SELECT c.name, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS spent FROM customers c "
    "JOIN orders o ON o.customer_id = c.customer_id JOIN order_items oi ON oi.order_id = o.order_id "
    "WHERE o.status = 'delivered' GROUP BY c.customer_id, c.name ORDER BY spent DESC LIMIT 3",
    "SELECT c.name, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS spent FROM customers c "
    "JOIN orders o ON o.customer_id = c.customer_id JOIN order_items oi ON oi.order_id = o.order_id "
    "GROUP BY c.customer_id, c.name ORDER BY spent DESC LIMIT 3",
    ordered=True,
)
task(
    "shop",
    3,
    "customers",
    "Which customers have bought products from every category in the catalogue (counting all their orders, "
    "whatever the status)? Give their names.",
    "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.customer_id "
    "JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id "
    "GROUP BY c.customer_id, c.name HAVING COUNT(DISTINCT p.category) = (SELECT COUNT(DISTINCT category) FROM products)",
    "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.customer_id "
    "JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id "
    "GROUP BY c.customer_id, c.name HAVING COUNT(p.category) >= (SELECT COUNT(DISTINCT category) FROM products)",
)

# -- school: departments, teachers, courses, students, enrollments ------------------------------------------

task(
    "school",
    1,
    "students",
    "List the names of all fourth-year students in alphabetical order.",
    "SELECT name FROM students WHERE year = 4 ORDER BY name",
    "SELECT name FROM students WHERE year = 4 ORDER BY name DESC",
    ordered=True,
)
task(
    "school",
    1,
    "courses",
    "How many courses are worth 5 credits?",
    "SELECT COUNT(*) FROM courses WHERE credits = 5",
    "SELECT COUNT(*) FROM courses WHERE credits >= 4",
)
task(
    "school",
    1,
    "courses",
    "Give the code and title of every course worth at least 4 credits.",
    "SELECT code, title FROM courses WHERE credits >= 4",
    "SELECT code, title FROM courses WHERE credits > 4",
)
task(
    "school",
    1,
    "students",
    "Which students have not declared a major yet? Give their names.",
    "SELECT name FROM students WHERE major_dept_id IS NULL",
    "SELECT name FROM students WHERE major_dept_id = NULL",
)
task(
    "school",
    1,
    "enrollments",
    "What is the average grade of the graded enrollments in the term 2024-fall, rounded to 2 decimal places?",
    "SELECT ROUND(AVG(grade), 2) FROM enrollments WHERE term = '2024-fall'",
    "SELECT ROUND(SUM(grade) * 1.0 / COUNT(*), 2) FROM enrollments WHERE term = '2024-fall'",
)
task(
    "school",
    2,
    "courses",
    "For each department, give its name and the number of courses it offers (0 if it offers none).",
    "SELECT d.name, COUNT(c.course_id) FROM departments d LEFT JOIN courses c ON c.dept_id = d.dept_id "
    "GROUP BY d.dept_id, d.name",
    "SELECT d.name, COUNT(c.course_id) FROM departments d JOIN courses c ON c.dept_id = d.dept_id "
    "GROUP BY d.dept_id, d.name",
)
task(
    "school",
    2,
    "teachers",
    "Which teachers teach at least two courses? Give the teacher's name and the number of courses they teach.",
    "SELECT t.name, COUNT(*) FROM teachers t JOIN courses c ON c.teacher_id = t.teacher_id "
    "GROUP BY t.teacher_id, t.name HAVING COUNT(*) >= 2",
    "SELECT t.name, COUNT(*) FROM teachers t JOIN courses c ON c.teacher_id = t.teacher_id "
    "GROUP BY t.teacher_id, t.name HAVING COUNT(*) > 2",
)
task(
    "school",
    2,
    "enrollments",
    "For each course with at least one graded enrollment, give its code and its average grade rounded to 1 "
    "decimal place, from the highest average to the lowest; courses with the same rounded average in "
    "alphabetical order of code.",
    "SELECT c.code, ROUND(AVG(e.grade), 1) AS avg_grade FROM courses c JOIN enrollments e ON e.course_id = c.course_id "
    "WHERE e.grade IS NOT NULL GROUP BY c.course_id, c.code ORDER BY avg_grade DESC, c.code",
    "SELECT c.code, ROUND(AVG(e.grade), 1) AS avg_grade FROM courses c JOIN enrollments e ON e.course_id = c.course_id "
    "WHERE e.grade IS NOT NULL GROUP BY c.course_id, c.code ORDER BY avg_grade, c.code",
    ordered=True,
)
task(
    "school",
    2,
    "enrollments",
    "How many different students are enrolled in each term? Give the term and the number of students.",
    "SELECT term, COUNT(DISTINCT student_id) FROM enrollments GROUP BY term",
    "SELECT term, COUNT(*) FROM enrollments GROUP BY term",
)
task(
    "school",
    2,
    "enrollments",
    "Which students took at least one course taught by a teacher from the Physics department? Give each "
    "student's name once.",
    "SELECT DISTINCT s.name FROM students s JOIN enrollments e ON e.student_id = s.student_id "
    "JOIN courses c ON c.course_id = e.course_id JOIN teachers t ON t.teacher_id = c.teacher_id "
    "JOIN departments d ON d.dept_id = t.dept_id WHERE d.name = 'Physics'",
    "SELECT s.name FROM students s JOIN departments d ON d.dept_id = s.major_dept_id WHERE d.name = 'Physics'",
)
task(
    "school",
    2,
    "enrollments",
    "For the term 2024-fall, give each student's name and the total credits of the courses they passed "
    "(a grade of 50 or more); leave out students who passed none.",
    "SELECT s.name, SUM(c.credits) FROM students s JOIN enrollments e ON e.student_id = s.student_id "
    "JOIN courses c ON c.course_id = e.course_id WHERE e.term = '2024-fall' AND e.grade >= 50 "
    "GROUP BY s.student_id, s.name",
    "SELECT s.name, SUM(c.credits) FROM students s JOIN enrollments e ON e.student_id = s.student_id "
    "JOIN courses c ON c.course_id = e.course_id WHERE e.grade >= 50 GROUP BY s.student_id, s.name",
)
task(
    "school",
    3,
    "enrollments",
    "Which students have an average grade, over their graded enrollments, above the average grade of all "
    "graded enrollments? Give the name and the student's average rounded to 2 decimal places.",
    "SELECT s.name, ROUND(AVG(e.grade), 2) FROM students s JOIN enrollments e ON e.student_id = s.student_id "
    "WHERE e.grade IS NOT NULL GROUP BY s.student_id, s.name HAVING AVG(e.grade) > (SELECT AVG(grade) FROM enrollments)",
    "SELECT s.name, ROUND(AVG(COALESCE(e.grade, 0)), 2) FROM students s JOIN enrollments e ON e.student_id = s.student_id "
    "GROUP BY s.student_id, s.name HAVING AVG(COALESCE(e.grade, 0)) > (SELECT AVG(grade) FROM enrollments)",
)
task(
    "school",
    3,
    "enrollments",
    "For each course, who got the highest grade in it (over both terms)? Give the course code, the student's "
    "name and the grade; when several enrollments share a course's top grade, list them all.",
    "SELECT c.code, s.name, e.grade FROM enrollments e JOIN courses c ON c.course_id = e.course_id "
    "JOIN students s ON s.student_id = e.student_id "
    "WHERE e.grade = (SELECT MAX(e2.grade) FROM enrollments e2 WHERE e2.course_id = e.course_id)",
    "SELECT c.code, s.name, MAX(e.grade) FROM enrollments e JOIN courses c ON c.course_id = e.course_id "
    "JOIN students s ON s.student_id = e.student_id GROUP BY c.course_id, c.code",
)
task(
    "school",
    3,
    "courses",
    "Which courses have nobody enrolled at all? Give the code and title.",
    "SELECT c.code, c.title FROM courses c WHERE NOT EXISTS "
    "(SELECT 1 FROM enrollments e WHERE e.course_id = c.course_id)",
    "SELECT c.code, c.title FROM courses c LEFT JOIN enrollments e ON e.course_id = c.course_id WHERE e.grade IS NULL",
)
task(
    "school",
    3,
    "departments",
    "Rank the departments by the average grade of all graded enrollments in the courses they offer. Give the "
    "names of the top 3 departments with that average rounded to 2 decimal places, highest first.",
    "SELECT d.name, ROUND(AVG(e.grade), 2) AS avg_grade FROM departments d JOIN courses c ON c.dept_id = d.dept_id "
    "JOIN enrollments e ON e.course_id = c.course_id WHERE e.grade IS NOT NULL GROUP BY d.dept_id, d.name "
    "ORDER BY avg_grade DESC LIMIT 3",
    "WITH per_course AS (SELECT c.dept_id, AVG(e.grade) AS course_avg FROM courses c "
    "JOIN enrollments e ON e.course_id = c.course_id WHERE e.grade IS NOT NULL GROUP BY c.course_id) "
    "SELECT d.name, ROUND(AVG(p.course_avg), 2) AS avg_grade FROM departments d JOIN per_course p ON p.dept_id = d.dept_id "
    "GROUP BY d.dept_id, d.name ORDER BY avg_grade DESC LIMIT 3",
    ordered=True,
)
task(
    "school",
    3,
    "enrollments",
    "Which students have more enrollments than the average number of enrollments per student, where students "
    "without any enrollment count as zero? Give their names.",
    "SELECT s.name FROM students s JOIN enrollments e ON e.student_id = s.student_id GROUP BY s.student_id, s.name "
    "HAVING COUNT(*) > (SELECT COUNT(*) * 1.0 / (SELECT COUNT(*) FROM students) FROM enrollments)",
    "SELECT s.name FROM students s JOIN enrollments e ON e.student_id = s.student_id GROUP BY s.student_id, s.name "
    "HAVING COUNT(*) > (SELECT AVG(n) FROM (SELECT COUNT(*) AS n FROM enrollments GROUP BY student_id))",
)

# -- library: authors, books, members, loans ----------------------------------------------------------------

task(
    "library",
    1,
    "books",
    "List the title and publication year of the books published before 1975, oldest first; books from the same "
    "year in alphabetical order of title.",
    "SELECT title, published_year FROM books WHERE published_year < 1975 ORDER BY published_year, title",
    "SELECT title, published_year FROM books WHERE published_year < 1975 ORDER BY title",
    ordered=True,
)
task(
    "library",
    1,
    "loans",
    "How many loans have not been returned yet?",
    "SELECT COUNT(*) FROM loans WHERE return_date IS NULL",
    "SELECT COUNT(*) FROM loans WHERE return_date IS NOT NULL",
)
task(
    "library",
    1,
    "members",
    "Give the names of the premium members who joined in 2023.",
    "SELECT name FROM members WHERE membership = 'premium' AND joined_date BETWEEN '2023-01-01' AND '2023-12-31'",
    "SELECT name FROM members WHERE joined_date BETWEEN '2023-01-01' AND '2023-12-31'",
)
task(
    "library",
    1,
    "books",
    "What is the average number of pages of the Fantasy books, rounded to 1 decimal place?",
    "SELECT ROUND(AVG(pages), 1) FROM books WHERE genre = 'Fantasy'",
    "SELECT ROUND(AVG(pages), 1) FROM books",
)
task(
    "library",
    1,
    "books",
    "Which genres appear in the catalogue? List each genre once, in alphabetical order.",
    "SELECT DISTINCT genre FROM books ORDER BY genre",
    "SELECT genre FROM books ORDER BY genre",
    ordered=True,
)
task(
    "library",
    2,
    "books",
    "For each genre, give the genre, the number of books and their total number of pages.",
    "SELECT genre, COUNT(*), SUM(pages) FROM books GROUP BY genre",
    "SELECT genre, COUNT(DISTINCT author_id), SUM(pages) FROM books GROUP BY genre",
)
task(
    "library",
    2,
    "books",
    "Which authors have more than 3 books in the catalogue? Give the author's name and the number of books, "
    "most books first, ties in alphabetical order of name.",
    "SELECT a.name, COUNT(*) AS n FROM authors a JOIN books b ON b.author_id = a.author_id "
    "GROUP BY a.author_id, a.name HAVING COUNT(*) > 3 ORDER BY n DESC, a.name",
    "SELECT a.name, COUNT(*) AS n FROM authors a JOIN books b ON b.author_id = a.author_id "
    "GROUP BY a.author_id, a.name HAVING COUNT(*) >= 3 ORDER BY n DESC, a.name",
    ordered=True,
)
task(
    "library",
    2,
    "loans",
    "Which different books has the member with ID 7 borrowed? Give the titles, each once.",
    "SELECT DISTINCT b.title FROM loans l JOIN books b ON b.book_id = l.book_id WHERE l.member_id = 7",
    "SELECT DISTINCT b.title FROM loans l JOIN books b ON b.book_id = l.book_id WHERE l.book_id = 7",
)
task(
    "library",
    2,
    "loans",
    "For each city where members live, give the city and the number of loans made by members from that city; "
    "only cities with more than 25 loans.",
    "SELECT m.city, COUNT(*) FROM members m JOIN loans l ON l.member_id = m.member_id GROUP BY m.city "
    "HAVING COUNT(*) > 25",
    "SELECT m.city, COUNT(DISTINCT l.member_id) FROM members m JOIN loans l ON l.member_id = m.member_id "
    "GROUP BY m.city HAVING COUNT(*) > 25",
)
task(
    "library",
    2,
    "loans",
    "Which loans are overdue: not returned yet (no return date) and due before 2025-07-01? Give the book's "
    "title and the member's name.",
    "SELECT b.title, m.name FROM loans l JOIN books b ON b.book_id = l.book_id JOIN members m ON m.member_id = l.member_id "
    "WHERE l.return_date IS NULL AND l.due_date < '2025-07-01'",
    "SELECT b.title, m.name FROM loans l JOIN books b ON b.book_id = l.book_id JOIN members m ON m.member_id = l.member_id "
    "WHERE l.due_date < '2025-07-01'",
)
task(
    "library",
    2,
    "loans",
    "For each genre, what is the average length in days of the returned loans (from the loan date to the return "
    "date)? Give the genre and the average rounded to 1 decimal place.",
    "SELECT b.genre, ROUND(AVG(julianday(l.return_date) - julianday(l.loan_date)), 1) FROM loans l "
    "JOIN books b ON b.book_id = l.book_id WHERE l.return_date IS NOT NULL GROUP BY b.genre",
    "SELECT b.genre, ROUND(AVG(julianday(l.due_date) - julianday(l.loan_date)), 1) FROM loans l "
    "JOIN books b ON b.book_id = l.book_id GROUP BY b.genre",
)
task(
    "library",
    3,
    "members",
    "Which members have never borrowed a book? Give their names.",
    "SELECT m.name FROM members m WHERE NOT EXISTS (SELECT 1 FROM loans l WHERE l.member_id = m.member_id)",
    "SELECT m.name FROM members m LEFT JOIN loans l ON l.member_id = m.member_id AND l.return_date IS NULL "
    "WHERE l.loan_id IS NULL",
)
task(
    "library",
    3,
    "loans",
    "What is the most borrowed book of each genre? Give the genre, the title and its number of loans; when "
    "several books of a genre share the top count, list them all.",
    "WITH counts AS (SELECT b.genre, b.title, COUNT(*) AS n FROM loans l JOIN books b ON b.book_id = l.book_id "
    "GROUP BY b.book_id) SELECT genre, title, n FROM counts c WHERE n = (SELECT MAX(n) FROM counts c2 WHERE c2.genre = c.genre)",
    "WITH counts AS (SELECT b.genre, b.title, COUNT(DISTINCT l.member_id) AS n FROM loans l "
    "JOIN books b ON b.book_id = l.book_id GROUP BY b.book_id) "
    "SELECT genre, title, n FROM counts c WHERE n = (SELECT MAX(n) FROM counts c2 WHERE c2.genre = c.genre)",
)
task(
    "library",
    3,
    "loans",
    "Which authors have had their books borrowed by members from at least 6 different cities? Give the author's "
    "name and the number of different cities.",
    "SELECT a.name, COUNT(DISTINCT m.city) FROM authors a JOIN books b ON b.author_id = a.author_id "
    "JOIN loans l ON l.book_id = b.book_id JOIN members m ON m.member_id = l.member_id "
    "GROUP BY a.author_id, a.name HAVING COUNT(DISTINCT m.city) >= 6",
    "SELECT a.name, COUNT(m.city) FROM authors a JOIN books b ON b.author_id = a.author_id "
    "JOIN loans l ON l.book_id = b.book_id JOIN members m ON m.member_id = l.member_id "
    "GROUP BY a.author_id, a.name HAVING COUNT(m.city) >= 6",
)
task(
    "library",
    3,
    "loans",
    "Which 5 members returned the most books late (returned after the due date)? Give the name and the number "
    "of late returns, most first, ties in alphabetical order of name.",
    "SELECT m.name, COUNT(*) AS late FROM members m JOIN loans l ON l.member_id = m.member_id "
    "WHERE l.return_date > l.due_date GROUP BY m.member_id, m.name ORDER BY late DESC, m.name LIMIT 5",
    "SELECT m.name, COUNT(*) AS late FROM members m JOIN loans l ON l.member_id = m.member_id "
    "WHERE l.return_date >= l.due_date GROUP BY m.member_id, m.name ORDER BY late DESC, m.name LIMIT 5",
    ordered=True,
)
task(
    "library",
    3,
    "books",
    "Which books were borrowed more often than the average book, where books that were never borrowed count as "
    "zero loans? List the titles in alphabetical order.",
    "SELECT b.title FROM books b JOIN loans l ON l.book_id = b.book_id GROUP BY b.book_id, b.title "
    "HAVING COUNT(*) > (SELECT COUNT(*) * 1.0 / (SELECT COUNT(*) FROM books) FROM loans) ORDER BY b.title",
    "SELECT b.title FROM books b JOIN loans l ON l.book_id = b.book_id GROUP BY b.book_id, b.title "
    "HAVING COUNT(*) > (SELECT AVG(n) FROM (SELECT COUNT(*) AS n FROM loans GROUP BY book_id)) ORDER BY b.title",
    ordered=True,
)

# -- flights: airports, airlines, flights, passengers, bookings ---------------------------------------------

task(
    "flights",
    1,
    "airports",
    "Give the code and city of every airport in Estria.",
    "SELECT code, city FROM airports WHERE country = 'Estria'",
    "SELECT code, name FROM airports WHERE country = 'Estria'",
)
task(
    "flights",
    1,
    "flights",
    "How many flights are scheduled to last more than 2 hours?",
    "SELECT COUNT(*) FROM flights WHERE duration_min > 120",
    "SELECT COUNT(*) FROM flights WHERE duration_min > 2",
)
task(
    "flights",
    1,
    "flights",
    "List the flight number and departure time of every flight from VEL to QNH, earliest departure first.",
    "SELECT flight_no, departure FROM flights WHERE origin = 'VEL' AND destination = 'QNH' ORDER BY departure",
    "SELECT flight_no, departure FROM flights WHERE origin = 'QNH' AND destination = 'VEL' ORDER BY departure",
    ordered=True,
)
task(
    "flights",
    1,
    "flights",
    "What is the longest flight distance, in km?",
    "SELECT MAX(distance_km) FROM flights",
    "SELECT MAX(duration_min) FROM flights",
)
task(
    "flights",
    1,
    "bookings",
    "How many bookings are in business class?",
    "SELECT COUNT(*) FROM bookings WHERE cabin = 'business'",
    "SELECT COUNT(*) FROM bookings WHERE cabin <> 'economy'",
)
task(
    "flights",
    2,
    "flights",
    "For each airline, give its name and the number of flights it operates, most flights first, ties in "
    "alphabetical order of name.",
    "SELECT a.name, COUNT(*) AS n FROM airlines a JOIN flights f ON f.airline_code = a.code GROUP BY a.code, a.name "
    "ORDER BY n DESC, a.name",
    "SELECT a.name, COUNT(*) AS n FROM airlines a JOIN flights f ON f.airline_code = a.code GROUP BY a.code, a.name "
    "ORDER BY a.name",
    ordered=True,
)
task(
    "flights",
    2,
    "bookings",
    "What is the average fare in each cabin class? Give the cabin and the average rounded to 2 decimal places.",
    "SELECT cabin, ROUND(AVG(fare), 2) FROM bookings GROUP BY cabin",
    "SELECT cabin, ROUND(AVG(fare)) FROM bookings GROUP BY cabin",
)
task(
    "flights",
    2,
    "bookings",
    "Which flights have at least 8 bookings? Give the flight number and the number of bookings.",
    "SELECT f.flight_no, COUNT(*) FROM flights f JOIN bookings b ON b.flight_id = f.flight_id "
    "GROUP BY f.flight_id, f.flight_no HAVING COUNT(*) >= 8",
    "SELECT f.flight_no, COUNT(*) FROM flights f JOIN bookings b ON b.flight_id = f.flight_id "
    "GROUP BY f.flight_id, f.flight_no HAVING COUNT(*) > 8",
)
task(
    "flights",
    2,
    "bookings",
    "For the flights departing in April 2025, what was each airline's total fare revenue? Give the airline's name "
    "and the revenue rounded to 2 decimal places.",
    "SELECT a.name, ROUND(SUM(b.fare), 2) FROM bookings b JOIN flights f ON f.flight_id = b.flight_id "
    "JOIN airlines a ON a.code = f.airline_code WHERE f.departure >= '2025-04-01' AND f.departure < '2025-05-01' "
    "GROUP BY a.code, a.name",
    "SELECT a.name, ROUND(SUM(b.fare), 2) FROM bookings b JOIN flights f ON f.flight_id = b.flight_id "
    "JOIN airlines a ON a.code = f.airline_code GROUP BY a.code, a.name",
)
task(
    "flights",
    2,
    "airports",
    "For every airport, give its code and the number of flights departing from it (0 if there are none).",
    "SELECT ap.code, COUNT(f.flight_id) FROM airports ap LEFT JOIN flights f ON f.origin = ap.code GROUP BY ap.code",
    "SELECT ap.code, COUNT(f.flight_id) FROM airports ap LEFT JOIN flights f ON f.destination = ap.code GROUP BY ap.code",
)
task(
    "flights",
    2,
    "bookings",
    "Which passengers have more than 9 bookings? Give the passenger's name and the number of bookings.",
    "SELECT p.name, COUNT(*) FROM passengers p JOIN bookings b ON b.passenger_id = p.passenger_id "
    "GROUP BY p.passenger_id, p.name HAVING COUNT(*) > 9",
    "SELECT p.name, COUNT(*) FROM passengers p JOIN bookings b ON b.passenger_id = p.passenger_id "
    "GROUP BY p.passenger_id, p.name HAVING COUNT(*) >= 9",
)
task(
    "flights",
    3,
    "flights",
    "Which routes (an origin and a destination airport) are flown by at least three different airlines? Give the "
    "origin and destination codes.",
    "SELECT origin, destination FROM flights GROUP BY origin, destination HAVING COUNT(DISTINCT airline_code) >= 3",
    "SELECT origin, destination FROM flights GROUP BY origin, destination HAVING COUNT(*) >= 3",
)
task(
    "flights",
    3,
    "flights",
    "For each airline, which is its longest flight by distance? Give the airline's name, the flight number and "
    "the distance in km; list every flight that shares an airline's longest distance.",
    "SELECT a.name, f.flight_no, f.distance_km FROM flights f JOIN airlines a ON a.code = f.airline_code "
    "WHERE f.distance_km = (SELECT MAX(f2.distance_km) FROM flights f2 WHERE f2.airline_code = f.airline_code)",
    "SELECT a.name, f.flight_no, f.distance_km FROM flights f JOIN airlines a ON a.code = f.airline_code "
    "WHERE f.duration_min = (SELECT MAX(f2.duration_min) FROM flights f2 WHERE f2.airline_code = f.airline_code)",
)
task(
    "flights",
    3,
    "bookings",
    "Which flights brought in more fare revenue than the average flight, where flights without bookings count "
    "as zero revenue? Give the flight number and its revenue rounded to 2 decimal places, highest revenue first.",
    "SELECT f.flight_no, ROUND(SUM(b.fare), 2) AS revenue FROM flights f JOIN bookings b ON b.flight_id = f.flight_id "
    "GROUP BY f.flight_id, f.flight_no HAVING SUM(b.fare) > (SELECT SUM(fare) / (SELECT COUNT(*) FROM flights) FROM bookings) "
    "ORDER BY revenue DESC, f.flight_no",
    "SELECT f.flight_no, ROUND(SUM(b.fare), 2) AS revenue FROM flights f JOIN bookings b ON b.flight_id = f.flight_id "
    "GROUP BY f.flight_id, f.flight_no "
    "HAVING SUM(b.fare) > (SELECT AVG(total) FROM (SELECT SUM(fare) AS total FROM bookings GROUP BY flight_id)) "
    "ORDER BY revenue DESC, f.flight_no",
    ordered=True,
)
task(
    "flights",
    3,
    "bookings",
    "For each country, how many different passengers have booked a flight departing from an airport in that "
    "country? Give the country and the number of passengers.",
    "SELECT ap.country, COUNT(DISTINCT b.passenger_id) FROM bookings b JOIN flights f ON f.flight_id = b.flight_id "
    "JOIN airports ap ON ap.code = f.origin GROUP BY ap.country",
    "SELECT ap.country, COUNT(*) FROM bookings b JOIN flights f ON f.flight_id = b.flight_id "
    "JOIN airports ap ON ap.code = f.origin GROUP BY ap.country",
)
task(
    "flights",
    3,
    "bookings",
    "What are the 3 routes with the highest total fare revenue? Give the origin city, the destination city and "
    "the revenue rounded to 2 decimal places, highest first.",
    "SELECT o.city, d.city, ROUND(SUM(b.fare), 2) AS revenue FROM bookings b JOIN flights f ON f.flight_id = b.flight_id "
    "JOIN airports o ON o.code = f.origin JOIN airports d ON d.code = f.destination "
    "GROUP BY f.origin, f.destination ORDER BY revenue DESC LIMIT 3",
    "SELECT o.city, d.city, ROUND(SUM(b.fare), 2) AS revenue FROM bookings b JOIN flights f ON f.flight_id = b.flight_id "
    "JOIN airports o ON o.code = f.origin JOIN airports d ON d.code = f.destination "
    "GROUP BY f.origin, f.destination ORDER BY COUNT(*) DESC LIMIT 3",
    ordered=True,
)
