package migrate
